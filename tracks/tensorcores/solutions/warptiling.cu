// Warp tiling, and a main loop with nothing in it but the work. The pipeline of step 5 on a 128 x 128 block
// tile, its 4 warps each computing a 64 x 64 warp tile as 4 x 8 mma tiles (128 fp32 accumulators a lane). Per
// 16-deep k step a warp loads 4 A fragments and 8 B fragments (8 ldmatrix.x4) for 32 mma.sync, where step 5's
// 32 x 32 warp tile needed 4 ldmatrix.x4 for 8: twice the tensor-core work per byte read from shared memory,
// and half the global traffic per FLOP (a 128 x 128 tile instead of 64 x 64). Two more changes keep the
// tensor cores fed:
// - the fragments are double-buffered in registers: the ldmatrix of the next k step (of the next slab, after
//   the barrier, at a slab's last step) are issued before this step's 32 mma.sync, which hide their latency;
// - the copy loops have trip counts known at compile time (each thread copies the same swizzled column of
//   every pass of rows, at offsets that fold into immediates) and each lane's ldmatrix offsets are computed
//   once, before the K loop. Step 5's `for (c = tid; c < ...; c += NT)` loops compile to real loops with
//   their index arithmetic, which more than doubles the instructions issued for each mma.sync: with two
//   warps a scheduler, issuing them, not the tensor cores, sets the pace.
// Hypothesis: with the copies hidden, a 32 x 32 warp tile is bound by ldmatrix and the instructions around
// mma.sync; a larger warp tile and a loop of little more than ldmatrix and mma.sync move the bound towards the
// tensor cores themselves (mma.sync's ceiling).
// The launch: 32 x 4 threads on a 128 x 128 tile of C, warp tiles of 64 x 64, BK = 32, STAGES = 3 (48 KiB
// of shared memory, the static limit). Assumes M and N multiples of 128 and K of 32.
typedef unsigned short bf16;   // the raw bits of a bfloat16
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define WARPS_N (BN / WN)
#define MI (WM / 16)           // mma tiles down a warp tile
#define NI (WN / 8)            // and across it
#define KSTEPS (BK / 16)       // 16-deep mma steps a slab
#define RA (NT / (BK / 8))     // rows of A one pass of 16-byte copies covers
#define RB (NT / (BN / 8))     // and rows of B

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// element offsets of (row, column) in the swizzled slabs; the column is a multiple of 8 (one 16-byte chunk)
__device__ __forceinline__ int a_at(int r, int k) { return r * BK + (((k / 8) ^ ((r / 2) % 4)) * 8); }
__device__ __forceinline__ int b_at(int k, int n) { return k * BN + (((n / 8) ^ (k % 8)) * 8); }

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
tc_warptiling(float* C, const bf16* A, const bf16* B, int M, int N, int K)
{
    static_assert(BK == 32 && BN % 64 == 0, "the swizzles assume 64-byte rows of A and rows of B of 128 bytes or more");
    static_assert(STAGES >= 2 && STAGES * (BM + BN) * BK * 2 <= 48 * 1024, "the stages must fit 48 KiB");
    static_assert(RA % 8 == 0 && RB % 8 == 0 && BM % RA == 0 && BK % RB == 0,
                  "every pass of copies covers whole rows and keeps each thread's swizzled column");
    __shared__ __align__(128) bf16 As[STAGES][BM * BK];
    __shared__ __align__(128) bf16 Bs[STAGES][BK * BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = K / BK;
    const unsigned as0 = smem(As), bs0 = smem(Bs);   // byte addresses; stage s starts s * 2 * BM * BK further

    // this thread's copies: one 16-byte chunk of each pass of RA rows of A (RB of B), in the same column
    const int ra = tid / (BK / 8), ka = (tid % (BK / 8)) * 8, kb = tid / (BN / 8), nb = (tid % (BN / 8)) * 8;
    const bf16* a_src = A + (size_t)(row0 + ra) * K + ka;
    const bf16* b_src = B + (size_t)kb * N + col0 + nb;
    const unsigned a_dst = 2 * a_at(ra, ka), b_dst = 2 * b_at(kb, nb);
    const size_t a_pass = (size_t)RA * K, b_pass = (size_t)RB * N;
    auto copy_slab = [&](int stage, int kt) {   // issue the cp.asyncs of slab kt into buffer stage
        const bf16* a = a_src + kt * BK;
        const bf16* b = b_src + (size_t)kt * BK * N;
        const unsigned sa = as0 + stage * (2 * BM * BK) + a_dst, sb = bs0 + stage * (2 * BK * BN) + b_dst;
#pragma unroll
        for (int pass = 0; pass < BM / RA; ++pass, a += a_pass) cp_async16(sa + pass * (2 * RA * BK), a);
#pragma unroll
        for (int pass = 0; pass < BK / RB; ++pass, b += b_pass) cp_async16(sb + pass * (2 * RB * BN), b);
    };

    // this lane's ldmatrix byte offsets in a stage: A's change with the k step (its swizzle), B's with the
    // pair of 8-column tiles; the other index adds a constant. Lane l points at row l % 16, column (l / 16) * 8
    // of a 16 x 16 tile of A, and at k row l % 16, n column (l / 16) * 8 of B.
    unsigned a_ld[KSTEPS], b_ld[NI / 2];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) a_ld[ks] = 2 * a_at(wrow + lane % 16, 16 * ks + (lane / 16) * 8);
#pragma unroll
    for (int jp = 0; jp < NI / 2; ++jp) b_ld[jp] = 2 * b_at(lane % 16, wcol + 16 * jp + (lane / 16) * 8);

    float acc[MI][NI][4] = {};
    unsigned a[2][MI][4], b[2][NI][2];   // two k steps of fragments (KSTEPS is even): one multiplied while the
                                         // next loads
    auto load_fragments = [&](int buf, int stage, int ks) {
        const unsigned sa = as0 + stage * (2 * BM * BK) + a_ld[ks];
        const unsigned sb = bs0 + stage * (2 * BK * BN) + ks * (2 * 16 * BN);
#pragma unroll
        for (int i = 0; i < MI; ++i) ldmatrix_x4(a[buf][i], sa + i * (2 * 16 * BK));
#pragma unroll
        for (int jp = 0; jp < NI / 2; ++jp) {
            unsigned r[4];
            ldmatrix_x4_trans(r, sb + b_ld[jp]);
            b[buf][2 * jp][0] = r[0]; b[buf][2 * jp][1] = r[1];
            b[buf][2 * jp + 1][0] = r[2]; b[buf][2 * jp + 1][1] = r[3];
        }
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) copy_slab(s, s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();   // slab 0 has landed (this thread's copies)
    __syncthreads();               // everyone's
    load_fragments(0, 0, 0);
    int read = 0, write = STAGES - 1;   // the buffers of slab kt and of slab kt + STAGES - 1
    for (int kt = 0; kt < tiles; ++kt) {
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            if (ks == 0) {   // buffer `write` held slab kt - 1, which every warp finished before the last barrier
                if (kt + STAGES - 1 < tiles) copy_slab(write, kt + STAGES - 1);
                cp_async_commit();
                write = write == STAGES - 1 ? 0 : write + 1;
            }
            if (ks == KSTEPS - 1) {   // the next fragments are slab kt + 1's: wait for it, everyone's copies
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                read = read == STAGES - 1 ? 0 : read + 1;
                if (kt + 1 < tiles) load_fragments((ks + 1) % 2, read, 0);
            } else {
                load_fragments((ks + 1) % 2, read, ks + 1);
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_bf16(acc[i][j], a[ks % 2][i], b[ks % 2][j][0], b[ks % 2][j][1]);
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
