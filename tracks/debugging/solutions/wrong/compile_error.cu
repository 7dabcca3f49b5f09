// expect: softmax_score=0
// status: compile_error
// Does not compile: `m` is never declared.
extern "C" __global__ void softmax_rows(float* out, const float* x, int rows, int cols)
{
    const float* in = x + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += BLOCK_X) out[(size_t)blockIdx.x * cols + c] = expf(in[c] - m);
}
