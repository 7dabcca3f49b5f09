// mma.sync and ldmatrix: the PTX instruction under WMMA, mma.sync.aligned.m16n8k16 (bf16 in, fp32
// accumulate), with fragments loaded from shared memory by ldmatrix. The fragment layouts are now yours:
// a lane holds A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..] (g = lane / 4, t = lane % 4),
// B[2t..2t+1][g] and B[2t+8..][g], and C[g][2t..2t+1], C[g+8][2t..]. ldmatrix.x4 gives a lane exactly its
// A registers from four 8 x 8 blocks, each lane passing the address of one 16-byte row; ldmatrix.x4.trans
// reads B, stored k-major (row-major), transposed into the column fragments mma wants, for two n tiles at
// once. The block tile is 64 x 64 with BK = 32; each of the 4 warps computes a WM x WN warp tile as
// (WM / 16) x (WN / 8) mma tiles. Shared memory is a plain row-major copy of each slab, as in step 2
// without the padding.
// Hypothesis: the same work as WMMA with shared memory, but the fragments are explicit, so the later steps
// can choose the shared-memory layout and the loads. Not faster yet: ldmatrix reads 8 rows of 16 bytes at
// once, and in an unpadded slab those rows share banks (ncu counts the conflicts; step 4 removes them).
// The launch: 32 x 4 threads on a 64 x 64 tile of C, warp tiles of 32 x 32, BK = 32.
// Assumes M and N multiples of 64 and K of 32.
typedef unsigned short bf16;   // the raw bits of a bfloat16
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define WARPS_N (BN / WN)
#define MI (WM / 16)           // mma tiles down a warp tile
#define NI (WN / 8)            // and across it

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(NT)
tc_mma(float* C, const bf16* A, const bf16* B, int M, int N, int K)
{
    __shared__ __align__(16) bf16 As[BM * BK];
    __shared__ __align__(16) bf16 Bs[BK * BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[MI][NI][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int c = tid; c < BM * BK / 8; c += NT) {     // 16-byte chunks of 8 bf16
            const int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
            *(uint4*)&As[r * BK + k] = *(const uint4*)&A[(size_t)(row0 + r) * K + k0 + k];
        }
        for (int c = tid; c < BK * BN / 8; c += NT) {
            const int k = c / (BN / 8), n = (c % (BN / 8)) * 8;
            *(uint4*)&Bs[k * BN + n] = *(const uint4*)&B[(size_t)(k0 + k) * N + col0 + n];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i)    // lane l points at row l % 16, column (l / 16) * 8 of the 16 x 16 tile
                ldmatrix_x4(a[i], smem(&As[(wrow + 16 * i + lane % 16) * BK + kk + (lane / 16) * 8]));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {   // lane l points at k row l % 16, n column (l / 16) * 8
                unsigned r[4];
                ldmatrix_x4_trans(r, smem(&Bs[(kk + lane % 16) * BN + wcol + 8 * j + (lane / 16) * 8]));
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
        __syncthreads();
    }
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            float* c = &C[(size_t)(row0 + wrow + 16 * i + g) * N + col0 + wcol + 8 * j + 2 * t];
            *(float2*)c = make_float2(acc[i][j][0], acc[i][j][1]);
            *(float2*)(c + 8 * (size_t)N) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}
