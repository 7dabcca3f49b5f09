// expect: add_score=0
// status: oob_write|crashed
// The one-element-per-thread kernel without its `i < n` check: right when n is a multiple of the block, but
// at n = 1 or 255 the last block's extra threads write past the end of `out`, into the guard band (their
// reads past the ends of `a` and `b` may also fault).
extern "C" __global__ void vecadd(float* out, const float* a, const float* b, int n)
{
    const int i = blockIdx.x * BLOCK_X + threadIdx.x;
    out[i] = a[i] + b[i];
}
