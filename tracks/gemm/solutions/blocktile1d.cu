// 4. 1D block tiling: each thread computes TM = TILE_Y / BLOCK_Y elements of one column of C, so one value
// of B read from shared memory feeds TM multiply-adds. A 64 x 64 tile of C per block of 64 x 8 threads
// (TM = 8), BK = 8. Out-of-range slab elements are loaded as 0 and stores are guarded: any M, N, K.
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
    const int tcol = threadIdx.x;              // this thread's column in the tile
    const int trow = threadIdx.y * TM;         // its first row; it owns rows trow .. trow + TM - 1
    float acc[TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += NT) {
            const int r = i / BK, c = i % BK;
            As[r][c] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += NT) {
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[trow + i][k] * b;
        }
        __syncthreads();
    }
    const int col = col0 + tcol;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow + i;
        if (row < M && col < N) C[(size_t)row * N + col] = acc[i];
    }
}
