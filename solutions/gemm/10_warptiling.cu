// 10. Warp tiling: a third level of tiling between the block and the thread. The 128 x 128 block tile is
// split into 8 warp tiles of WM x WN = 64 x 32 (2 down, 4 across); inside a warp tile the 32 lanes form an
// 8 x 4 grid, and each lane computes a 2 x 2 grid of 4 x 4 patches, 32 rows or 16 columns apart. So in every
// quarter warp the LDS.128 reads of A hit 2 consecutive float4s and those of B 4 consecutive float4s (no
// bank conflicts), each lane's 8 x 8 outputs come from 4 LDS.128 per k step (16 FMAs per shared load), and
// a warp reads only its own 64 rows of As and 32 columns of Bs.
// The K loop is double-buffered: the next BK slab is loaded from global memory into registers while the
// current one is multiplied out of shared memory, then stored into the other buffer; one __syncthreads per
// slab. A's slab is stored transposed (As[k][m]), consecutive threads taking consecutive rows of A so that
// the transposing stores hit consecutive words.
// Assumes M, N multiples of the tile (128) and K a multiple of BK. 16 x 16 threads (TM = TN = 8), BK = 16.
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)

extern "C" __global__ void __launch_bounds__(NT, 2)
sgemm_warptiling(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K)
{
#define LANES_N (WN / 8)               // lanes across a warp tile (each covers 2 x 4 columns)
#define LANES_M (32 / LANES_N)         // lanes down it (each covers 2 x 4 rows)
#define A_LOADS (BM * BK / 4 / NT)     // float4 loads of A per thread per slab
#define B_LOADS (BK * BN / 4 / NT)
    static_assert(LANES_M * 8 == WM && (BM / WM) * (BN / WN) * 32 == NT, "warp tiles must cover the block tile");
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

    float acc[8][8] = {{0.0f}};
    FETCH(0)
    STORE(0)
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) { FETCH(k0 + BK) }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][am]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][am + WM / 2]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][bn]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][bn + WN / 2]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        if (more) { STORE(buf ^ 1) }
        __syncthreads();
        buf ^= 1;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        float* c = &C[(size_t)(row0 + am + (i / 4) * (WM / 2) + i % 4) * N + col0 + bn];
        *reinterpret_cast<float4*>(c) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(c + WN / 2) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}
