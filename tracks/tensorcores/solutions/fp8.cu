// The precision menu, fp8: inputs in e4m3 (4 significant bits, largest value 448), converted in registers to
// fp16 pairs (cvt.rn.f16x2.e4m3x2, exact: every e4m3 value is an fp16 value) and multiplied by
// mma.sync.m16n8k16 .f16 with an fp32 accumulator. A is row-major and B column-major (B[k][n] at B[n * K + k]),
// as cuBLAS's fp8 GEMM wants them: both are read along K. The slabs are 64 bytes deep (BK = 64) and swizzled as
// A's in step 4; one ldmatrix.x4 (16-bit rows: four e4m3 values to a 32-bit word) gives a lane the fragment of a
// 16 x 32 tile of A, A[g][4t..4t+3], A[g+8][..], A[g][16+4t..], A[g+8][16+..], or B[4t..4t+3][g] and
// B[16+4t..][g] of two 8-column tiles of B (g = lane / 4, t = lane % 4). Each register becomes two fp16 pairs,
// and the 32-deep step two m16n8k16: the first takes the pairs of A's first two registers and B's first (k 0-15),
// the second the rest; within a step the k order is the registers', not m16n8k16's, which is no error since A's
// and B's k are permuted alike. The main loop is step 6's (copies in passes known at compile time, ldmatrix
// offsets computed once), with B's fragments of the next k step loaded before this step's mma.sync.
// Hypothesis: Hopper's mma.sync has no fp8 path (fp8 runs on its warpgroup instructions, wgmma): for sm_90 ptxas
// turns each m16n8k32 .e4m3 into conversions, two fp16 HMMA into a fresh accumulator and four FADDs that add it
// in, so a kernel written with it issues more FADDs than HMMA. Converting each fragment once and accumulating in
// the fp16 HMMA themselves leaves a K loop of little more than ldmatrix, the conversions and HMMA: fp8 runs at
// the fp16 step's rate in FLOP/s or above it (half the bytes through shared memory and ldmatrix a FLOP), while
// cuBLAS's fp8 GEMM runs wgmma at twice the fp16 rate, so its share of cuBLAS stays below step 7's.
// The launch: step 6's, 32 x 4 threads on a 128 x 128 tile of C, warp tiles of 64 x 64, BK = 64, STAGES = 3.
// Assumes M and N multiples of 128 and K of 64.
typedef unsigned char fp8;     // the raw bits of an e4m3 value
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define WARPS_N (BN / WN)
#define MI (WM / 16)           // mma tiles down a warp tile
#define NI (WN / 8)            // and across it
#define KSTEPS (BK / 32)       // 32-deep mma steps a slab
#define ROWS (NT / (BK / 16))  // rows of A (columns of B) one pass of 16-byte copies covers

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// byte offset of (row, k) in a swizzled slab of 64-byte rows (A's rows of M, B's columns of N); k is a
// multiple of 16 (one 16-byte chunk)
__device__ __forceinline__ int at(int r, int k) { return r * BK + (((k / 16) ^ ((r / 2) % 4)) * 16); }

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N_>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N_) : "memory"); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// the four e4m3 values of x as two fp16 pairs: bytes 0-1 in lo, bytes 2-3 in hi
__device__ __forceinline__ void e4m3_to_f16x2(unsigned x, unsigned& lo, unsigned& hi)
{
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.rn.f16x2.e4m3x2 %0, l; cvt.rn.f16x2.e4m3x2 %1, h; }"
        : "=r"(lo), "=r"(hi) : "r"(x));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(NT)
tc_fp8(float* C, const fp8* A, const fp8* B, int M, int N, int K)
{
    static_assert(BK == 64, "the swizzle assumes 64-byte rows");
    static_assert(STAGES >= 2 && STAGES * (BM + BN) * BK <= 48 * 1024, "the stages must fit 48 KiB");
    static_assert(ROWS % 8 == 0 && BM % ROWS == 0 && BN % ROWS == 0,
                  "every pass of copies covers whole rows and keeps each thread's swizzled column");
    __shared__ __align__(128) fp8 As[STAGES][BM * BK];
    __shared__ __align__(128) fp8 Bs[STAGES][BN * BK];   // B's columns, each a 64-byte row of K
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = K / BK;
    const unsigned as0 = smem(As), bs0 = smem(Bs);   // stage s starts s * BM * BK (BN * BK) bytes further

    // this thread's copies: one 16-byte chunk of each pass of ROWS rows of A (columns of B), in the same chunk
    // column, so each pass adds a constant (the swizzle repeats every 8 rows)
    const int r = tid / (BK / 16), k = (tid % (BK / 16)) * 16;
    const fp8* a_src = A + (size_t)(row0 + r) * K + k;
    const fp8* b_src = B + (size_t)(col0 + r) * K + k;
    const unsigned dst = at(r, k);
    const size_t pass_bytes = (size_t)ROWS * K;
    auto copy_slab = [&](int stage, int kt) {   // issue the cp.asyncs of slab kt into buffer stage
        const fp8* a = a_src + kt * BK;
        const fp8* b = b_src + kt * BK;
        const unsigned sa = as0 + stage * (BM * BK) + dst, sb = bs0 + stage * (BN * BK) + dst;
#pragma unroll
        for (int pass = 0; pass < BM / ROWS; ++pass, a += pass_bytes) cp_async16(sa + pass * (ROWS * BK), a);
#pragma unroll
        for (int pass = 0; pass < BN / ROWS; ++pass, b += pass_bytes) cp_async16(sb + pass * (ROWS * BK), b);
    };

    // this lane's ldmatrix byte offsets in a stage, by k step (the swizzle); the 16-row tiles of A and the pairs
    // of 8-column tiles of B add 16 rows each, which keeps the swizzle. For A lane l points at row l % 16, byte
    // (l / 16) * 16 of the 16 x 32 tile; for B at column (l / 16) * 8 + l % 8, byte (l / 8) % 2 * 16.
    unsigned a_ld[KSTEPS], b_ld[KSTEPS];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
        a_ld[ks] = at(wrow + lane % 16, 32 * ks + (lane / 16) * 16);
        b_ld[ks] = at(wcol + (lane / 16) * 8 + lane % 8, 32 * ks + (lane / 8) % 2 * 16);
    }

    float acc[MI][NI][4] = {};
    unsigned a[MI][4], b[2][NI][2];   // A's fragments of this k step, B's of two: one multiplied while the next loads
    auto load_b = [&](int buf, int stage, int ks) {
        const unsigned sb = bs0 + stage * (BN * BK) + b_ld[ks];
#pragma unroll
        for (int jp = 0; jp < NI / 2; ++jp) {
            unsigned q[4];
            ldmatrix_x4(q, sb + jp * (16 * BK));
            b[buf][2 * jp][0] = q[0]; b[buf][2 * jp][1] = q[1];
            b[buf][2 * jp + 1][0] = q[2]; b[buf][2 * jp + 1][1] = q[3];
        }
    };
    auto load_a = [&](int stage, int ks) {
        const unsigned sa = as0 + stage * (BM * BK) + a_ld[ks];
#pragma unroll
        for (int i = 0; i < MI; ++i) ldmatrix_x4(a[i], sa + i * (16 * BK));
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) copy_slab(s, s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();   // slab 0 has landed (this thread's copies)
    __syncthreads();               // everyone's
    load_b(0, 0, 0);
    int read = 0, write = STAGES - 1;   // the buffers of slab kt and of slab kt + STAGES - 1
    for (int kt = 0; kt < tiles; ++kt) {
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            load_a(read, ks);   // before the barrier of a slab's last step: `read` is still slab kt's
            if (ks == 0) {   // buffer `write` held slab kt - 1, which every warp finished before the last barrier
                if (kt + STAGES - 1 < tiles) copy_slab(write, kt + STAGES - 1);
                cp_async_commit();
                write = write == STAGES - 1 ? 0 : write + 1;
            }
            if (ks == KSTEPS - 1) {   // B's next fragments are slab kt + 1's: wait for it, everyone's copies
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                read = read == STAGES - 1 ? 0 : read + 1;
                if (kt + 1 < tiles) load_b((ks + 1) % 2, read, 0);
            } else {
                load_b((ks + 1) % 2, read, ks + 1);
            }
            unsigned fa[MI][2][4], fb[NI][2][2];   // as fp16 pairs: [.][0] k 0-15 of the step, [.][1] k 16-31
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    e4m3_to_f16x2(a[i][2 * h], fa[i][h][0], fa[i][h][2]);
                    e4m3_to_f16x2(a[i][2 * h + 1], fa[i][h][1], fa[i][h][3]);
                }
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) e4m3_to_f16x2(b[ks % 2][j][h], fb[j][h][0], fb[j][h][1]);
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < MI; ++i)
#pragma unroll
                    for (int j = 0; j < NI; ++j) mma_f16(acc[i][j], fa[i][h], fb[j][h][0], fb[j][h][1]);
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
