// expect: swizzle_score=1
// status: unmet
// Step 3's plain row-major slabs handed in as the swizzled step: correct, and its speed is close, but ncu
// counts its ldmatrix bank conflicts (8 rows of 16 bytes at the same bank offset), far above 0.05 x step
// 3's own: the counter rule keeps its correctness point only.
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
tc_swizzle(float* C, const bf16* A, const bf16* B, int M, int N, int K)
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
