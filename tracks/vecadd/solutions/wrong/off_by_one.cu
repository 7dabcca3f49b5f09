// expect: add_score=0
// status: oob_write
// `i <= n` instead of `i < n`: one thread writes out[n], one element past the end of `out`, at every size
// that is not a multiple of the block.
extern "C" __global__ void vecadd(float* out, const float* a, const float* b, int n)
{
    const int i = blockIdx.x * BLOCK_X + threadIdx.x;
    if (i <= n) out[i] = a[i] + b[i];
}
