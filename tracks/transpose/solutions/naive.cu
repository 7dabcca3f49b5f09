// Naive transpose: one element per thread. Reads along a row are coalesced; writes go down a column of
// `out`, rows * 4 bytes apart, so every warp's store touches 32 different memory segments.
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
}
