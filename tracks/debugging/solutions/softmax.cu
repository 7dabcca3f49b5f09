// The fix: subtract the row's max before expf (a block max, then a block sum of expf(x - max)): the largest term
// is expf(0) = 1, so nothing overflows and the sum is at least 1.
__device__ float block_reduce(float v, bool is_max, float* partial)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    __syncthreads();   // the previous reduction's readers are done with partial
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < BLOCK_X / 32; ++w) v = is_max ? fmaxf(v, partial[w]) : v + partial[w];
    return v;
}

extern "C" __global__ void softmax_rows(float* out, const float* x, int rows, int cols)
{
    __shared__ float partial[BLOCK_X / 32];
    const int tid = threadIdx.x;
    const float* in = x + (size_t)blockIdx.x * cols;
    float* p = out + (size_t)blockIdx.x * cols;
    float m = -__int_as_float(0x7f800000);   // -inf
    for (int c = tid; c < cols; c += BLOCK_X) m = fmaxf(m, in[c]);
    m = block_reduce(m, true, partial);
    float sum = 0.0f;
    for (int c = tid; c < cols; c += BLOCK_X) {
        const float e = expf(in[c] - m);
        p[c] = e;
        sum += e;
    }
    const float inv = 1.0f / block_reduce(sum, false, partial);
    for (int c = tid; c < cols; c += BLOCK_X) p[c] *= inv;
}
