// expect: blocktile1d_score=0
// status: oob_write|incorrect|crashed
// Kernel 4 without its bounds checks: fine when M, N and K are multiples of the tile, but at 1000 x 1030 x 77
// it reads past the ends of A and B and writes rows of C that do not exist (caught by the guard bands).
#define BM TILE_Y
#define BN TILE_X
#define TM (TILE_Y / BLOCK_Y)
#define NT (BLOCK_X * BLOCK_Y)

extern "C" __global__ void sgemm_blocktile1d(float* C, const float* A, const float* B, int M, int N, int K)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tcol = threadIdx.x, trow = threadIdx.y * TM;
    float acc[TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += NT)
            As[i / BK][i % BK] = A[(size_t)(row0 + i / BK) * K + k0 + i % BK];
        for (int i = tid; i < BK * BN; i += NT)
            Bs[i / BN][i % BN] = B[(size_t)(k0 + i / BN) * N + col0 + i % BN];
        __syncthreads();
        for (int k = 0; k < BK; ++k)
            for (int i = 0; i < TM; ++i) acc[i] += As[trow + i][k] * Bs[k][tcol];
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i) C[(size_t)(row0 + trow + i) * N + col0 + tcol] = acc[i];
}
