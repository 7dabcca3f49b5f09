// Coalesced, vectorised loads: one block per row. Thread t reads 16-byte chunks t, t + 256, ... of the row (each a
// uint4: 32 e2m1 codes, two scale blocks), so a warp's load covers 512 consecutive bytes; the 256 partial sums are
// added in shared memory, halving the active threads at each level. The decode is still the naive one, per value.
// Hypothesis: the bytes now arrive in full 128-byte lines, one 16-byte load per 32 values instead of 32 one-byte
// loads scattered over 32 rows, and every SM has rows to work on; what remains slow is the decode: ldexpf and
// branches per value, the scale decoded for every value of its block.
// The launch: 256 threads a block, one row a block.

__device__ float e2m1_value(unsigned code)
{
    const int exponent = (code >> 1) & 3, mantissa = code & 1;
    const float magnitude = exponent == 0 ? 0.5f * mantissa : ldexpf(1.0f + 0.5f * mantissa, exponent - 1);
    return (code & 8) ? -magnitude : magnitude;
}

__device__ float e4m3_value(unsigned bits)
{
    const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
    const float magnitude = exponent == 0 ? ldexpf(mantissa / 8.0f, -6) : ldexpf(1.0f + mantissa / 8.0f, exponent - 7);
    return (bits & 0x80) ? -magnitude : magnitude;
}

extern "C" __global__ void nvfp4_coalesced(float* y, const unsigned char* w, const unsigned char* scales,
                                           const float* tensor_scale, const float* x, int M, int K)
{
    __shared__ float partial[BLOCK_X];
    const int row = blockIdx.y, chunks = K / 32;
    const uint4* wrow = reinterpret_cast<const uint4*>(w + (size_t)row * (K / 2));
    const unsigned char* srow = scales + (size_t)row * (K / 16);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += BLOCK_X) {
        const uint4 v = wrow[c];
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 32; ++j) {   // value j of the chunk: word j / 8, nibble j % 8
            const int k = 32 * c + j;
            const unsigned code = (words[j / 8] >> (4 * (j % 8))) & 15;
            sum += e2m1_value(code) * e4m3_value(srow[k / 16]) * tensor_scale[0] * x[k];
        }
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[row] = partial[0];
}
