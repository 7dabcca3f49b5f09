// expect: copy_score=0
// status: crashed
// Writes 4 TiB past `out`, far outside any allocation: the GPU reports an illegal address.
extern "C" __global__ void copy_kernel(float* out, const float* in, int rows, int cols)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) out[(size_t)1 << 40] = in[0];
}
