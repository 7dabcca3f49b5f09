// expect: naive_score=0
// status: compile_error
// No semicolon at the end of line 9: the compiler reports line 10 (the next statement) of the cell.
extern "C" __global__ void sgemm_naive(float* C, const float* A, const float* B, int M, int N, int K)
{
    const int row = blockIdx.y * TILE_Y + threadIdx.y;
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
