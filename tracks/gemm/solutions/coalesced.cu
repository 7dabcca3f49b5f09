// 2. Global-memory coalescing: the naive kernel with the thread-to-element map turned around.
// threadIdx.x now runs along a row of C, so in a warp the reads of B and the writes of C are 32 consecutive
// floats (one 128-byte transaction) and A[row][k] is the same address for the whole warp (a broadcast).
// Same launch as kernel 1 (32 x 32 threads, 32 x 32 tile). Any M, N, K.
extern "C" __global__ void sgemm_coalesced(float* C, const float* A, const float* B, int M, int N, int K)
{
    const int row = blockIdx.y * TILE_Y + threadIdx.y;
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
