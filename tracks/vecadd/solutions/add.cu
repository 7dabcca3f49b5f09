// Add two vectors: one element per thread. Thread `threadIdx.x` of block `blockIdx.x` owns element
// i = blockIdx.x * BLOCK_X + threadIdx.x; consecutive threads touch consecutive floats, so every warp's loads
// and store are coalesced. The last block runs past n unless n is a multiple of the block, so each thread
// checks i < n before touching memory.
extern "C" __global__ void vecadd(float* out, const float* a, const float* b, int n)
{
    const int i = blockIdx.x * BLOCK_X + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
