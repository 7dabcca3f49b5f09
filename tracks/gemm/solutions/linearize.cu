// 7. Bank conflicts, fix 1 (linearize): lay the work out so that neighbouring threads touch neighbouring
// shared-memory words. In kernel 6 thread tx reads its 8 values of B at Bs[k][8 tx ..]: in each quarter
// warp of LDS.128 requests, threads 0..7 hit float4 slots 0, 2, .. 14, two to a bank group (a 2-way
// conflict). Here a thread's TN columns are TN / 4 float4s spaced BLOCK_X * 4 apart (columns 4 tx .. 4 tx + 3
// and 64 + 4 tx ..), so threads 0..7 read 8 consecutive float4s; rows likewise. The transposed stores of A
// also conflicted (threads 2r and 2r + 1 wrote the same bank); here consecutive threads load consecutive
// rows of A, so they write consecutive words of As[k][.].
// Assumes M, N multiples of the tile (128) and K a multiple of BK. 16 x 16 threads, TM = TN = 8, BK = 8.
#define BM TILE_Y
#define BN TILE_X
#define TM (TILE_Y / BLOCK_Y)
#define TN (TILE_X / BLOCK_X)
#define NT (BLOCK_X * BLOCK_Y)

extern "C" __global__ void __launch_bounds__(NT)
sgemm_linearize(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K)
{
    __shared__ __align__(16) float As[BK][BM];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = threadIdx.y * 4, tcol = threadIdx.x * 4;   // first row and column; then every BLOCK_* * 4
    A += (size_t)row0 * K;
    B += col0;
    float acc[TM][TN] = {{0.0f}};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int p = 0; p < (BM * BK / 4 + NT - 1) / NT; ++p) {
            const int i = tid + p * NT;
            if ((BM * BK / 4) % NT != 0 && i >= BM * BK / 4) break;          // consecutive threads: consecutive rows
            const int r = i % BM, c = (i / BM) * 4;
            const float4 v = *reinterpret_cast<const float4*>(&A[(size_t)r * K + k0 + c]);
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
#pragma unroll
        for (int p = 0; p < (BK * BN / 4 + NT - 1) / NT; ++p) {
            const int i = tid + p * NT;
            if ((BK * BN / 4) % NT != 0 && i >= BK * BN / 4) break;
            const int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = *reinterpret_cast<const float4*>(&B[(size_t)(k0 + r) * N + c]);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[k][trow + i * BLOCK_Y]);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tcol + j * BLOCK_X]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow + (i / 4) * 4 * BLOCK_Y + i % 4;
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            *reinterpret_cast<float4*>(&C[(size_t)row * N + col0 + tcol + j * BLOCK_X]) =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
    }
}
