// expect: naive_score=0
// status: compile_error
// A missing semicolon on line 8 (the line the compile error must name: line 8 or 9).
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const float v = in[(size_t)row * cols + col]
    if (row < rows && col < cols) out[(size_t)col * rows + row] = v;
}
