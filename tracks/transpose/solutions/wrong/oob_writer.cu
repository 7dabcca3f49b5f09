// expect: naive_score=0
// status: oob_write
// A correct naive transpose that also writes one value 8 elements past the end of `out`.
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
    if (row == 0 && col == 0) out[(size_t)rows * cols + 7] = 0.0f;
}
