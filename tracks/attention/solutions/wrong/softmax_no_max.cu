// expect: softmax_three_pass_score=0
// status: incorrect
// The three-pass softmax without the max: it sums exp(x) and writes exp(x) / sum, which is the same in exact
// arithmetic. But a row whose logits reach 89 overflows expf to inf (inf / inf is NaN), and a row whose
// logits all lie below -104 underflows every exp to 0 (0 / 0 is NaN); the hidden rows have both.
extern "C" __global__ void softmax_three_pass(float* out, const float* x, int rows, int cols)
{
    constexpr int WARPS = BLOCK_X / 32;
    static_assert(BLOCK_X % 32 == 0, "whole warps");
    __shared__ float partial[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float* row = x + (long long)blockIdx.x * cols;
    float* dst = out + (long long)blockIdx.x * cols;

    const float m = 0.0f;   // the max is not found: exp(x - 0)
    float d = 0.0f;
#pragma unroll 4   // four loads in flight per thread
    for (int c = threadIdx.x; c < cols; c += BLOCK_X) d += expf(row[c] - m);
    for (int off = 16; off > 0; off /= 2) d += __shfl_xor_sync(0xffffffffu, d, off);
    if (lane == 0) partial[warp] = d;
    __syncthreads();
    d = 0.0f;
    for (int w = 0; w < WARPS; ++w) d += partial[w];

    const float inv = 1.0f / d;
#pragma unroll 4
    for (int c = threadIdx.x; c < cols; c += BLOCK_X) dst[c] = expf(row[c] - m) * inv;
}
