// expect: warptiling_score>1 warptiling_score<3 warptiling_sass=1
// status: ok
// Kernel 6 (vectorized 2D block tiling, no warp tiles, no double buffering) handed in as the
// warp-tiling kernel: correct under the same launch (16 x 16 threads, 128 x 256 tile, so 8 x 16 outputs a thread;
// BK = 8), but slower than the reference. At this tile a thread's 16 columns of B are 64 bytes apart from
// its neighbour's, so each quarter warp's LDS.128 of B lands 4 lanes on the same banks (a 4-way conflict).
#define BM TILE_Y
#define BN TILE_X
#define TM (TILE_Y / BLOCK_Y)
#define TN (TILE_X / BLOCK_X)
#define NT (BLOCK_X * BLOCK_Y)

extern "C" __global__ void __launch_bounds__(NT)
sgemm_warptiling(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K)
{
    __shared__ __align__(16) float As[BK][BM];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = threadIdx.y * TM, tcol = threadIdx.x * TN;
    A += (size_t)row0 * K;
    B += col0;
    float acc[TM][TN] = {{0.0f}};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int p = 0; p < (BM * BK / 4 + NT - 1) / NT; ++p) {
            const int i = tid + p * NT;
            if ((BM * BK / 4) % NT != 0 && i >= BM * BK / 4) break;   // a row of A's slab is BK / 4 float4s
            const int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
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
                const float4 v = *reinterpret_cast<const float4*>(&As[k][trow + i]);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tcol + j]);
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
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            *reinterpret_cast<float4*>(&C[(size_t)(row0 + trow + i) * N + col0 + tcol + j]) =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}
