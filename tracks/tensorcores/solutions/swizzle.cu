// XOR-swizzled shared memory: the slabs of step 3, stored so that the 8 rows an ldmatrix reads (and the
// 16-byte chunks a quarter warp stores) fall in 8 different bank groups. A row of A's slab (BK = 32 bf16)
// is 64 bytes, 4 chunks of 16 bytes; chunk c of row r is stored at chunk c ^ ((r / 2) % 4). A row of B's
// slab (BN bf16) holds BN / 8 chunks; chunk c of row k is stored at chunk c ^ (k % 8). Within any 8
// consecutive rows the swizzled chunks cover all 8 bank groups of a 128-byte line, so every ldmatrix phase
// is one wavefront. Padding would do the same for ldmatrix, at the cost of shared memory and of the 128-byte
// alignment cp.async and later TMA want; the swizzle costs an XOR per address.
// Hypothesis: step 3's ldmatrix reads are serialized by bank conflicts; with none, shared memory stops
// being the bottleneck of the inner loop (graded here on ncu's count of ldmatrix bank conflicts, at most
// 0.05 x step 3's, and on speed).
// The launch: step 3's, 32 x 4 threads on a 64 x 64 tile of C, warp tiles of 32 x 32, BK = 32. Assumes M and N multiples of 64 and K of 32.
typedef unsigned short bf16;   // the raw bits of a bfloat16
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define WARPS_N (BN / WN)
#define MI (WM / 16)           // mma tiles down a warp tile
#define NI (WN / 8)            // and across it

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// element offsets of (row, column) in the swizzled slabs; the column is a multiple of 8 (one 16-byte chunk)
__device__ __forceinline__ int a_at(int r, int k) { return r * BK + (((k / 8) ^ ((r / 2) % 4)) * 8); }
__device__ __forceinline__ int b_at(int k, int n) { return k * BN + (((n / 8) ^ (k % 8)) * 8); }

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
tc_swizzle(float* C, const bf16* A, const bf16* B, int M, int N, int K)
{
    static_assert(BK == 32 && BN % 64 == 0, "the swizzles assume 64-byte rows of A and rows of B of 128 bytes or more");
    __shared__ __align__(16) bf16 As[BM * BK];
    __shared__ __align__(16) bf16 Bs[BK * BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[MI][NI][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int c = tid; c < BM * BK / 8; c += NT) {     // 16-byte chunks of 8 bf16
            const int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
            *(uint4*)&As[a_at(r, k)] = *(const uint4*)&A[(size_t)(row0 + r) * K + k0 + k];
        }
        for (int c = tid; c < BK * BN / 8; c += NT) {
            const int k = c / (BN / 8), n = (c % (BN / 8)) * 8;
            *(uint4*)&Bs[b_at(k, n)] = *(const uint4*)&B[(size_t)(k0 + k) * N + col0 + n];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i)    // lane l points at row l % 16, column (l / 16) * 8 of the 16 x 16 tile
                ldmatrix_x4(a[i], smem(&As[a_at(wrow + 16 * i + lane % 16, kk + (lane / 16) * 8)]));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {   // lane l points at k row l % 16, n column (l / 16) * 8
                unsigned r[4];
                ldmatrix_x4_trans(r, smem(&Bs[b_at(kk + lane % 16, wcol + 8 * j + (lane / 16) * 8)]));
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
