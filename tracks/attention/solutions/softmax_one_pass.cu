// Softmax in one pass: each thread loads its columns of the row into registers once (ITEMS of them: thread t
// takes columns t, t + BLOCK_X, ..., so a row may be up to BLOCK_X x ITEMS long), finds its own max m and
// sum d of exp(x - m) from them, and the block combines the (m, d) pairs with the online rule
// M = max(m1, m2), d = d1 * exp(m1 - M) + d2 * exp(m2 - M), with shuffles, then across warps through shared
// memory. The probabilities are then computed from the registers: the row is read once and written once,
// as a copy moves it.
extern "C" __global__ void softmax_one_pass(float* out, const float* x, int rows, int cols)
{
    const float NEG_INF = __int_as_float(0xff800000);   // -infinity (NVRTC has no INFINITY here)
    constexpr int WARPS = BLOCK_X / 32;
    static_assert(BLOCK_X % 32 == 0, "whole warps");
    __shared__ float part_m[WARPS], part_d[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float* row = x + (long long)blockIdx.x * cols;
    float* dst = out + (long long)blockIdx.x * cols;

    float v[ITEMS];
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int c = threadIdx.x + i * BLOCK_X;
        v[i] = c < cols ? row[c] : NEG_INF;
        m = fmaxf(m, v[i]);
    }
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) d += v[i] == NEG_INF ? 0.0f : expf(v[i] - m);

    for (int off = 16; off > 0; off /= 2) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off), d2 = __shfl_xor_sync(0xffffffffu, d, off);
        const float top = fmaxf(m, m2);
        if (top != NEG_INF) {   // both (-inf, 0): stays (-inf, 0), no exp(-inf - -inf) = NaN
            d = d * expf(m - top) + d2 * expf(m2 - top);
            m = top;
        }
    }
    if (lane == 0) {
        part_m[warp] = m;
        part_d[warp] = d;
    }
    __syncthreads();
    m = NEG_INF;
    for (int w = 0; w < WARPS; ++w) m = fmaxf(m, part_m[w]);
    d = 0.0f;
    for (int w = 0; w < WARPS; ++w) d += part_m[w] == NEG_INF ? 0.0f : part_d[w] * expf(part_m[w] - m);

    const float inv = 1.0f / d;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int c = threadIdx.x + i * BLOCK_X;
        if (c < cols) dst[c] = expf(v[i] - m) * inv;
    }
}
