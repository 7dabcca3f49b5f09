// Softmax of each row in three passes over its logits: the row's max m, then the sum d of exp(x - m), then
// out = exp(x - m) / d. Subtracting m keeps every exp in [0, 1]: the logits here reach the hundreds, and
// expf overflows to inf above 88.7. One block per row: each thread strides over the row (thread t takes
// columns t, t + BLOCK_X, ...: a warp's loads are coalesced), then the block combines its threads' partial
// results, first within each warp with shuffles, then across warps through shared memory. The row is read
// three times and written once.
extern "C" __global__ void softmax_three_pass(float* out, const float* x, int rows, int cols)
{
    const float NEG_INF = __int_as_float(0xff800000);   // -infinity (NVRTC has no INFINITY here)
    constexpr int WARPS = BLOCK_X / 32;
    static_assert(BLOCK_X % 32 == 0, "whole warps");
    __shared__ float partial[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float* row = x + (long long)blockIdx.x * cols;
    float* dst = out + (long long)blockIdx.x * cols;

    float m = NEG_INF;
#pragma unroll 4   // four loads in flight per thread
    for (int c = threadIdx.x; c < cols; c += BLOCK_X) m = fmaxf(m, row[c]);
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) partial[warp] = m;
    __syncthreads();
    m = partial[0];
    for (int w = 1; w < WARPS; ++w) m = fmaxf(m, partial[w]);
    __syncthreads();   // every thread has read partial before it is reused

    float d = 0.0f;
#pragma unroll 4
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
