// expect: mma_score>=1 mma_score<=3 mma_sass=0
// status: ok
// Step 2's WMMA kernel handed in as the mma.sync step: correct, and its SASS has HMMA and LDSM (wmma.load
// from shared memory compiles to ldmatrix), but the step asks for mma.sync with fragments you lay out
// yourself; the structural check reads the source's PTX and finds wmma instructions.
typedef unsigned short bf16;   // the raw bits of a bfloat16
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define PAD 8                  // bf16 of padding at the end of each shared row
#define LDA (BK + PAD)
#define LDB (BN + PAD)

struct FragA { unsigned x[4]; };
struct FragB { unsigned x[4]; };
struct FragC { float x[8]; };

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void load_a(FragA& f, const bf16* p, int ld)
{
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3]) : "r"(smem(p)), "r"(ld));
}

__device__ __forceinline__ void load_b(FragB& f, const bf16* p, int ld)
{
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3]) : "r"(smem(p)), "r"(ld));
}

__device__ __forceinline__ void mma(FragC& d, const FragA& a, const FragB& b)
{
    asm volatile("wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
                 "{%0, %1, %2, %3, %4, %5, %6, %7};"
                 : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]),
                   "+f"(d.x[4]), "+f"(d.x[5]), "+f"(d.x[6]), "+f"(d.x[7])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]),
                   "r"(b.x[0]), "r"(b.x[1]), "r"(b.x[2]), "r"(b.x[3]));
}

__device__ __forceinline__ void store_c(float* p, const FragC& c, int ld)
{
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "l"(p), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]),
                    "f"(c.x[4]), "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]), "r"(ld) : "memory");
}

extern "C" __global__ void __launch_bounds__(NT)
tc_mma(float* C, const bf16* A, const bf16* B, int M, int N, int K)
{
    __shared__ __align__(32) bf16 As[BM * LDA];
    __shared__ __align__(32) bf16 Bs[BK * LDB];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    const int warp = threadIdx.y;                        // 4 warps: a 2 x 2 grid of 32 x 32 warp tiles
    const int wrow = (warp / 2) * 32, wcol = (warp % 2) * 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    FragC acc[2][2];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            for (int e = 0; e < 8; ++e) acc[i][j].x[e] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int c = tid; c < BM * BK / 8; c += NT) {     // 16-byte chunks of 8 bf16
            const int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
            *(uint4*)&As[r * LDA + k] = *(const uint4*)&A[(size_t)(row0 + r) * K + k0 + k];
        }
        for (int c = tid; c < BK * BN / 8; c += NT) {
            const int k = c / (BN / 8), n = (c % (BN / 8)) * 8;
            *(uint4*)&Bs[k * LDB + n] = *(const uint4*)&B[(size_t)(k0 + k) * N + col0 + n];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            FragA a[2];
            FragB b[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) load_a(a[i], &As[(wrow + 16 * i) * LDA + kk], LDA);
#pragma unroll
            for (int j = 0; j < 2; ++j) load_b(b[j], &Bs[kk * LDB + wcol + 16 * j], LDB);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) mma(acc[i][j], a[i], b[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            store_c(&C[(size_t)(row0 + wrow + 16 * i) * N + col0 + wcol + 16 * j], acc[i][j], N);
}
