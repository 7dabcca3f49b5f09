// Decode with a lookup table and bit tricks: the coalesced kernel with a cheap decode. The 16 e2m1 values sit in a
// shared-memory table, built once per block (code c's sign moved to bit 31 and its exponent and mantissa bits to
// bits 24-22 of a float, times 2^126: the bit pattern is that value times 2^-126, subnormal codes included), so a
// value costs a shift, a mask and one shared load. An e4m3 scale is turned into a float the same way (sign to bit
// 31, the other 7 bits to bits 26-20, times 2^120), once per 16 values: each block of 16 is summed unscaled, then
// multiplied by its scale; the tensor scale is applied once, to the row's sum.
// Hypothesis: the decode was the bottleneck of the coalesced kernel (dozens of instructions a value); at a few a
// value the kernel is limited by memory again.
// The launch: 256 threads a block, one row a block.

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
        lut[c] = __uint_as_float(((c & 8u) << 28) | ((c & 7u) << 22)) * 0x1p126f;
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
