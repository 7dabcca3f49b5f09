// expect: softmax_two_pass_score=0
// status: compile_error
// The two-pass softmax written with INFINITY, as in host C++: NVRTC compiles the cell without <cmath> or
// <math_constants.h>, so the identifier is undefined ("identifier "INFINITY" is undefined").
extern "C" __global__ void softmax_two_pass(float* out, const float* x, int rows, int cols)
{
    constexpr int WARPS = BLOCK_X / 32;
    static_assert(BLOCK_X % 32 == 0, "whole warps");
    __shared__ float part_m[WARPS], part_d[WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float* row = x + (long long)blockIdx.x * cols;
    float* dst = out + (long long)blockIdx.x * cols;

    float m = -INFINITY, d = 0.0f;   // a thread with no column keeps (-inf, 0), which combines as nothing
#pragma unroll 4   // four loads in flight per thread
    for (int c = threadIdx.x; c < cols; c += BLOCK_X) {
        const float v = row[c];
        if (v > m) {
            d = d * expf(m - v) + 1.0f;   // expf(-inf) = 0 on the first column
            m = v;
        } else {
            d += expf(v - m);
        }
    }
    for (int off = 16; off > 0; off /= 2) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off), d2 = __shfl_xor_sync(0xffffffffu, d, off);
        const float top = fmaxf(m, m2);
        if (top != -INFINITY) {   // both (-inf, 0): stays (-inf, 0), no exp(-inf - -inf) = NaN
            d = d * expf(m - top) + d2 * expf(m2 - top);
            m = top;
        }
    }
    if (lane == 0) {
        part_m[warp] = m;
        part_d[warp] = d;
    }
    __syncthreads();
    m = -INFINITY;
    for (int w = 0; w < WARPS; ++w) m = fmaxf(m, part_m[w]);
    d = 0.0f;
    for (int w = 0; w < WARPS; ++w) d += part_m[w] == -INFINITY ? 0.0f : part_d[w] * expf(part_m[w] - m);

    const float inv = 1.0f / d;
#pragma unroll 4
    for (int c = threadIdx.x; c < cols; c += BLOCK_X) dst[c] = expf(row[c] - m) * inv;
}
