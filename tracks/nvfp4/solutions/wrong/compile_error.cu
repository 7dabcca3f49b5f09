// expect: decode_score=0
// status: compile_error
// The decode through cuda_fp4.h, as host code that includes it would write it (__nv_cvt_fp4x2_to_halfraw2, which
// on Blackwell is one cvt.rn.f16x2.e2m1x2 instruction): NVRTC compiles the cell without that header, so its names
// are undefined; and were it included, that instruction exists on sm_100a and later only, which ptxas refuses for
// the H200. On Hopper the decode is a table and bit tricks.
__device__ __forceinline__ float e4m3_bits(unsigned b)
{
    return __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7Fu) << 20)) * 0x1p120f;
}

// two e2m1 codes (the low byte of `byte`) as two floats, through cuda_fp4.h's conversion to a pair of halves
__device__ __forceinline__ void e2m1x2(unsigned byte, float& lo, float& hi)
{
    const __half2_raw pair = __nv_cvt_fp4x2_to_halfraw2((__nv_fp4x2_storage_t)byte, __NV_E2M1);
    lo = __half2float(__half(pair.x));
    hi = __half2float(__half(pair.y));
}

extern "C" __global__ void nvfp4_decode(float* y, const unsigned char* w, const unsigned char* scales,
                                        const float* tensor_scale, const float* x, int M, int K)
{
    __shared__ float partial[BLOCK_X];
    const int row = blockIdx.y, chunks = K / 32;
    const uint4* wrow = reinterpret_cast<const uint4*>(w + (size_t)row * (K / 2));
    const unsigned short* srow = reinterpret_cast<const unsigned short*>(scales + (size_t)row * (K / 16));
    float sum = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += BLOCK_X) {
        const uint4 v = wrow[c];
        const unsigned pair = srow[c];
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
        float half[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 16; ++j) {   // byte j of the chunk: values 2j and 2j + 1
            float lo, hi;
            e2m1x2(words[j / 4] >> (8 * (j % 4)), lo, hi);
            half[j / 8] += lo * x[32 * c + 2 * j] + hi * x[32 * c + 2 * j + 1];
        }
        sum += half[0] * e4m3_bits(pair & 0xFF) + half[1] * e4m3_bits(pair >> 8);
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[row] = partial[0] * tensor_scale[0];
}
