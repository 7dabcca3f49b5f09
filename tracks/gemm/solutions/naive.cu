// 1. Naive SGEMM: one thread per element of C, everything straight from global memory.
// Launch: 32 x 32 threads per block, a 32 x 32 tile of C per block. threadIdx.x runs down the rows of the
// tile, so the 32 threads of a warp read 32 different rows of A and write C with a stride of N floats:
// every warp-wide access touches 32 separate cache lines. Any M, N, K.
extern "C" __global__ void sgemm_naive(float* C, const float* A, const float* B, int M, int N, int K)
{
    const int row = blockIdx.y * TILE_Y + threadIdx.x;
    const int col = blockIdx.x * TILE_X + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
