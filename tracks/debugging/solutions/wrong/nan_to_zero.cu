// expect: softmax_score=0
// status: incorrect
// The NaN hidden, not fixed: NaN becomes 0, so a row whose largest logit overflows expf holds zeros (and a row
// of finite exps next to an inf one, zeros too) instead of probabilities that sum to 1.
extern "C" __global__ void softmax_rows(float* out, const float* x, int rows, int cols)
{
    __shared__ float partial[BLOCK_X / 32];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float* in = x + (size_t)blockIdx.x * cols;
    float* p = out + (size_t)blockIdx.x * cols;
    float sum = 0.0f;
    for (int c = tid; c < cols; c += BLOCK_X) {
        const float e = expf(in[c]);
        p[c] = e;
        sum += e;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < BLOCK_X / 32; ++w) sum += partial[w];
    const float inv = 1.0f / sum;
    for (int c = tid; c < cols; c += BLOCK_X) {
        const float q = p[c] * inv;
        p[c] = q != q ? 0.0f : q;   // q != q: q is NaN
    }
}
