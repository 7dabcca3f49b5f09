// expect: decode_score=0
// status: incorrect
// An e2m1 decode that drops the sign: the table is built from each code's exponent and mantissa bits only, so codes
// 8 to 15 decode to +0 ... +6 instead of -0 ... -6 and every negative weight is added as a positive one.

// an e4m3 byte as a float: its fields moved into a float's, the exponent bias (127 - 7) restored by the multiply
__device__ __forceinline__ float e4m3_bits(unsigned b)
{
    return __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7Fu) << 20)) * 0x1p120f;
}

extern "C" __global__ void nvfp4_decode(float* y, const unsigned char* w, const unsigned char* scales,
                                        const float* tensor_scale, const float* x, int M, int K)
{
    __shared__ float lut[16];
    __shared__ float partial[BLOCK_X];
    if (threadIdx.x < 16) {
        const unsigned c = threadIdx.x;
        lut[c] = __uint_as_float((c & 7u) << 22) * 0x1p126f;   // bits 0-2 only
    }
    __syncthreads();
    const int row = blockIdx.y, chunks = K / 32;
    const uint4* wrow = reinterpret_cast<const uint4*>(w + (size_t)row * (K / 2));
    const unsigned short* srow = reinterpret_cast<const unsigned short*>(scales + (size_t)row * (K / 16));
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += BLOCK_X) {
        const uint4 v = wrow[c];
        const unsigned pair = srow[c];   // the scales of values 32c .. 32c + 15 and 32c + 16 .. 32c + 31
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
        float half[2] = {0.0f, 0.0f};
#pragma unroll
        for (int q = 0; q < 8; ++q) {    // values 4q .. 4q + 3 of the chunk: word q / 2, from bit 16 (q % 2)
            const float4 xv = x4[8 * c + q];
            const unsigned word = words[q / 2] >> (16 * (q % 2));
            half[q / 4] += lut[word & 15] * xv.x + lut[(word >> 4) & 15] * xv.y + lut[(word >> 8) & 15] * xv.z
                           + lut[(word >> 12) & 15] * xv.w;
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
