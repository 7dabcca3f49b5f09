// expect: coalesced_score=0
// status: incorrect
// Reads B by row instead of by column (B[col * K + k], i.e. B transposed): right only where B happens to be
// symmetric, which random inputs never are.
extern "C" __global__ void sgemm_coalesced(float* C, const float* A, const float* B, int M, int N, int K)
{
    const int row = blockIdx.y * TILE_Y + threadIdx.y;
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)col * K + k];
    C[(size_t)row * N + col] = acc;
}
