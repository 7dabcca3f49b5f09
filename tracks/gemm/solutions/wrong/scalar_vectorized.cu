// expect: vectorized_score>=1 vectorized_score<2 vectorized_sass=0
// status: ok
// Kernel 5 (scalar loads) handed in as the vectorized kernel: correct and nearly as fast, but its SASS has
// only 32-bit global loads (LDG.E), so the structural check fails.
#define BM TILE_Y
#define BN TILE_X
#define TM (TILE_Y / BLOCK_Y)
#define TN (TILE_X / BLOCK_X)
#define NT (BLOCK_X * BLOCK_Y)

extern "C" __global__ void __launch_bounds__(NT)
sgemm_vectorized(float* C, const float* A, const float* B, int M, int N, int K)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = threadIdx.y * TM, tcol = threadIdx.x * TN;
    float acc[TM][TN] = {{0.0f}};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = tid; i < BM * BK; i += NT) {
            const int r = i / BK, c = i % BK;
            As[r][c] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        }
#pragma unroll
        for (int i = tid; i < BK * BN; i += NT) {
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[trow + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tcol + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int row = row0 + trow + i, col = col0 + tcol + j;
            if (row < M && col < N) C[(size_t)row * N + col] = acc[i][j];
        }
}
