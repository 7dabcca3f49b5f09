// The precision menu, fp16: step 6's kernel with fp16 inputs (mma.sync.m16n8k16 .f16.f16 with an fp32
// accumulator). The fragments have the same layout as bf16's (16-bit values, two per register), so only the
// instruction's types change; the inputs are fp16, the baseline cuBLAS's fp16 GEMM with fp32 output.
// Hypothesis: on Hopper the tensor cores multiply fp16 and bf16 at the same rate, so this kernel runs as fast
// as step 6; what changes is the rounding of the inputs (11 significant bits instead of 8) and the range
// (fp16's largest value is 65504, bf16's that of fp32).
// The launch: step 6's, 32 x 4 threads on a 128 x 128 tile of C, warp tiles of 64 x 64, BK = 32, STAGES = 3.
// Assumes M and N multiples of 128 and K of 32.
typedef unsigned short f16;    // the raw bits of an IEEE half (fp16)
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

__device__ __forceinline__ void cp_async16(void* dst, const void* src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem(dst)), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N_>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N_) : "memory"); }

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

__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(NT)
tc_fp16(float* C, const f16* A, const f16* B, int M, int N, int K)
{
    static_assert(BK == 32 && BN % 64 == 0, "the swizzles assume 64-byte rows of A and rows of B of 128 bytes or more");
    static_assert(STAGES >= 2 && STAGES * (BM + BN) * BK * 2 <= 48 * 1024, "the stages must fit 48 KiB");
    __shared__ __align__(128) f16 As[STAGES][BM * BK];
    __shared__ __align__(128) f16 Bs[STAGES][BK * BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = K / BK;

    auto copy_slab = [&](int stage, int kt) {   // issue the cp.asyncs of slab kt into buffer stage
        const int k0 = kt * BK;
#pragma unroll
        for (int c = tid; c < BM * BK / 8; c += NT) {
            const int r = c / (BK / 8), k = (c % (BK / 8)) * 8;
            cp_async16(&As[stage][a_at(r, k)], &A[(size_t)(row0 + r) * K + k0 + k]);
        }
#pragma unroll
        for (int c = tid; c < BK * BN / 8; c += NT) {
            const int k = c / (BN / 8), n = (c % (BN / 8)) * 8;
            cp_async16(&Bs[stage][b_at(k, n)], &B[(size_t)(k0 + k) * N + col0 + n]);
        }
    };

    float acc[MI][NI][4] = {};
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) copy_slab(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<STAGES - 2>();   // slab kt has landed (this thread's copies)
        __syncthreads();               // everyone's copies of slab kt; everyone is done with slab kt - 1
        if (kt + STAGES - 1 < tiles) copy_slab((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        cp_async_commit();
        const f16* as = As[kt % STAGES];
        const f16* bs = Bs[kt % STAGES];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i)    // lane l points at row l % 16, column (l / 16) * 8 of the 16 x 16 tile
                ldmatrix_x4(a[i], smem(&as[a_at(wrow + 16 * i + lane % 16, kk + (lane / 16) * 8)]));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {   // lane l points at k row l % 16, n column (l / 16) * 8
                unsigned r[4];
                ldmatrix_x4_trans(r, smem(&bs[b_at(kk + lane % 16, wcol + 8 * j + (lane / 16) * 8)]));
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_f16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();
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
