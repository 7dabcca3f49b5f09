// 8. Bank conflicts, fix 2 (offset and swizzle): keep kernel 6's thread layout (each thread an 8 x 8
// contiguous patch) and move the data instead.
// - A's transposed slab gets 4 floats of padding per row (As[BK][BM + 4]): the two threads that used to
//   write the same bank (rows r of k and k + 4) are now 4 * 132 = 528 words apart, 16 banks away. The pad is
//   4 floats so that rows stay 16-byte aligned for LDS.128.
// - B's slab is swizzled at float4 granularity: float4 slot q of a row is stored at slot q ^ ((q >> 3) & 1).
//   Threads 0..7 of a quarter warp read slots 0, 2, .., 14 (for their first float4), which land on
//   0, 2, 4, 6, 9, 11, 13, 15: eight different bank groups. Stores of a whole row stay conflict-free (the
//   swizzle only permutes slots within a row).
// Assumes M, N multiples of the tile (128) and K a multiple of BK. 16 x 16 threads, TM = TN = 8, BK = 8.
#define BM TILE_Y
#define BN TILE_X
#define TM (TILE_Y / BLOCK_Y)
#define TN (TILE_X / BLOCK_X)
#define NT (BLOCK_X * BLOCK_Y)

extern "C" __global__ void __launch_bounds__(NT)
sgemm_swizzle(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K)
{
#define SWIZZLE(q) ((q) ^ (((q) >> 3) & 1))
    __shared__ __align__(16) float As[BK][BM + 4];
    __shared__ __align__(16) float4 Bs[BK][BN / 4];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = threadIdx.y * TM, tslot = threadIdx.x * (TN / 4);   // first row, first float4 slot
    A += (size_t)row0 * K;
    B += col0;
    float acc[TM][TN] = {{0.0f}};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int p = 0; p < (BM * BK / 4 + NT - 1) / NT; ++p) {
            const int i = tid + p * NT;
            if ((BM * BK / 4) % NT != 0 && i >= BM * BK / 4) break;
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
            const int r = i / (BN / 4), q = i % (BN / 4);
            Bs[r][SWIZZLE(q)] = *reinterpret_cast<const float4*>(&B[(size_t)(k0 + r) * N + q * 4]);
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
                const float4 v = Bs[k][SWIZZLE(tslot + j / 4)];
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
            *reinterpret_cast<float4*>(&C[(size_t)(row0 + trow + i) * N + col0 + tslot * 4 + j]) =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}
