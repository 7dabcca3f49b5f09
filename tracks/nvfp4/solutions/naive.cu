// The naive GEMV: one thread per row of W, walking its K values one at a time. Each value is decoded where it is
// used: its byte read, its nibble picked, the e2m1 code and the e4m3 scale of its 16-value block turned into floats
// by their fields (sign, exponent, mantissa, ldexpf), then multiplied by the tensor scale and x[k].
// Hypothesis: it is correct and as slow as a GEMV can be: the 32 threads of a warp read 32 rows, K / 2 bytes apart,
// one byte each, so every load instruction touches 32 sectors for 32 useful bytes; the scale is decoded 16 times
// over and the decode's branches and ldexpf cost far more instructions than the multiply-add they feed.
// The launch: 64 threads a block, one row each (TILE_Y = 64 rows a block).

// an e2m1 code (1 sign, 2 exponent bits with bias 1, 1 mantissa bit) as a float
__device__ float e2m1_value(unsigned code)
{
    const int exponent = (code >> 1) & 3, mantissa = code & 1;
    const float magnitude = exponent == 0 ? 0.5f * mantissa : ldexpf(1.0f + 0.5f * mantissa, exponent - 1);
    return (code & 8) ? -magnitude : magnitude;
}

// an e4m3 byte (1 sign, 4 exponent bits with bias 7, 3 mantissa bits) as a float
__device__ float e4m3_value(unsigned bits)
{
    const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
    const float magnitude = exponent == 0 ? ldexpf(mantissa / 8.0f, -6) : ldexpf(1.0f + mantissa / 8.0f, exponent - 7);
    return (bits & 0x80) ? -magnitude : magnitude;
}

extern "C" __global__ void nvfp4_naive(float* y, const unsigned char* w, const unsigned char* scales,
                                       const float* tensor_scale, const float* x, int M, int K)
{
    const int row = blockIdx.y * TILE_Y + threadIdx.x;
    if (row >= M) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
        const unsigned byte = w[(size_t)row * (K / 2) + k / 2];
        const unsigned code = k % 2 == 0 ? byte & 15 : byte >> 4;
        const float scale = e4m3_value(scales[(size_t)row * (K / 16) + k / 16]);
        sum += e2m1_value(code) * scale * tensor_scale[0] * x[k];
    }
    y[row] = sum;
}
