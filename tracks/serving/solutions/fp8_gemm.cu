// FP8 GEMM with per-tensor scales: the tensor-core track's fp8 kernel (tracks/tensorcores/solutions/fp8.cu:
// cp.async into swizzled 64-byte slabs, three stages, ldmatrix, mma.sync m16n8k32 .e4m3 with fp32 accumulators) with
// an fp8 checkpoint's two per-tensor fp32 scales, multiplied once into each output after the K
// loop: the scales are constant over K, so C = scale_a scale_b (A @ B) costs one multiply an element, not one a
// product. Hypothesis: this is a tensor-core GEMM and the scales are free; but Hopper's mma.sync has no fp8 path (ptxas
// turns each m16n8k32 .e4m3 into conversions and two fp16 HMMA), while cuBLASLt runs fp8 wgmma at twice the fp16 rate,
// so this kernel reaches a fraction of torch._scaled_mm that only Hopper's wgmma (the Hopper track) can raise. The
// launch: 32 x 8 threads on a 128 x 128 tile of C, warp tiles of 64 x 32 (the tensor-core track's 64 x 64 tiles leave
// no register for the scale: 255 a thread, and the multiply spills), BK = 64, STAGES = 3; M and N multiples of 128,
// K of 64.
typedef unsigned char fp8;     // the raw bits of an e4m3 value
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define WARPS_N (BN / WN)
#define MI (WM / 16)           // mma tiles down a warp tile
#define NI (WN / 8)            // and across it

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// byte offset of (row, k) in a swizzled slab of 64-byte rows (A's rows of M, B's columns of N); k is a
// multiple of 16 (one 16-byte chunk)
__device__ __forceinline__ int at(int r, int k) { return r * BK + (((k / 16) ^ ((r / 2) % 4)) * 16); }

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

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(NT)
fp8_gemm(float* C, const fp8* A, const fp8* B, const float* scale_a, const float* scale_b, int M, int N, int K)
{
    static_assert(BK == 64, "the swizzle assumes 64-byte rows");
    static_assert(STAGES >= 2 && STAGES * (BM + BN) * BK <= 48 * 1024, "the stages must fit 48 KiB");
    __shared__ __align__(128) fp8 As[STAGES][BM * BK];
    __shared__ __align__(128) fp8 Bs[STAGES][BN * BK];   // B's columns, each a 64-byte row of K
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = K / BK;

    auto copy_slab = [&](int stage, int kt) {   // issue the cp.asyncs of slab kt into buffer stage
        const int k0 = kt * BK;
#pragma unroll
        for (int c = tid; c < BM * BK / 16; c += NT) {
            const int r = c / (BK / 16), k = (c % (BK / 16)) * 16;
            cp_async16(&As[stage][at(r, k)], &A[(size_t)(row0 + r) * K + k0 + k]);
        }
#pragma unroll
        for (int c = tid; c < BN * BK / 16; c += NT) {
            const int n = c / (BK / 16), k = (c % (BK / 16)) * 16;
            cp_async16(&Bs[stage][at(n, k)], &B[(size_t)(col0 + n) * K + k0 + k]);
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
        const fp8* as = As[kt % STAGES];
        const fp8* bs = Bs[kt % STAGES];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 32) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i)    // lane l points at row l % 16, byte (l / 16) * 16 of the 16 x 32 tile
                ldmatrix_x4(a[i], smem(&as[at(wrow + 16 * i + lane % 16, kk + (lane / 16) * 16)]));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {   // lane l points at column (l / 16) * 8 + l % 8, byte (l / 8) % 2 * 16
                unsigned r[4];
                ldmatrix_x4(r, smem(&bs[at(wcol + 8 * j + (lane / 16) * 8 + lane % 8, kk + (lane / 8) % 2 * 16)]));
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_e4m3(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();
    const float s = *scale_a * *scale_b;   // per-tensor: one multiply an output, after the K loop
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            float* c = &C[(size_t)(row0 + wrow + 16 * i + g) * N + col0 + wcol + 8 * j + 2 * t];
            *(float2*)c = make_float2(s * acc[i][j][0], s * acc[i][j][1]);
            *(float2*)(c + 8 * (size_t)N) = make_float2(s * acc[i][j][2], s * acc[i][j][3]);
        }
}
