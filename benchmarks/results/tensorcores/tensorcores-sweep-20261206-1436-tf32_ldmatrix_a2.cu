// Candidate: the TF32 step with step 6's main loop. A's fragments come by ldmatrix.x4 (an m8n8 .b16 matrix is 8 rows
// of 16 bytes: 8 rows of 4 floats, and a lane gets row lane / 4, floats lane % 4: a0..a3 of m16n8k8 .tf32 from the
// four 8 x 4 quarters of a 16 x 8 tile of A), B's by scalar shared loads (its fragment is a column of 32-bit values,
// which ldmatrix cannot transpose); both rounded by cvt.rna. A's fragments of the next k step load before this
// step's mma.sync, as in step 6; B's in the step that uses them (registers: 255 with both double-buffered).
// The precision menu, TF32: every fp32 input is rounded to TF32 (10 explicit significand bits,
// cvt.rna.tf32.f32) as its fragment is loaded, and multiplied by mma.sync.m16n8k8 .tf32 with an fp32
// accumulator. The slabs are
// fp32 (BK = 16: rows of A are 64 bytes, as in the bf16 steps) copied by cp.async in the swizzled layout of
// step 4, pipelined as in step 5, each thread's copies in passes known at compile time as in step 6 (238 registers
// where step 5's loops took 252). ldmatrix moves 16-bit values, so the fragments are read with scalar shared
// loads: a lane holds A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4] and B[t][g], B[t+4][g] (g = lane / 4,
// t = lane % 4).
// Hypothesis: TF32 runs at half of bf16's tensor-core rate on Hopper and moves twice the bytes per value, so
// this kernel is slower than step 6 in FLOP/s; in exchange it takes fp32 inputs unconverted, with an input
// rounding error of 2^-11 instead of bf16's 2^-8.
// The launch: 32 x 4 threads on a 128 x 128 tile of C, warp tiles of 64 x 64, BK = 16, STAGES = 3.
// Assumes M and N multiples of 128 and K of 16.
#define BM TILE_Y
#define BN TILE_X
#define NT (BLOCK_X * BLOCK_Y)
#define WARPS_N (BN / WN)
#define MI (WM / 16)           // mma tiles down a warp tile
#define NI (WN / 8)            // and across it
#define RA (NT / (BK / 4))     // rows of A one pass of 16-byte copies (4 floats) covers
#define RB (NT / (BN / 4))     // and k rows of B
#define KSTEPS (BK / 8)        // 8-deep mma steps a slab

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// element offsets of (row, column) in the swizzled slabs: 16-byte chunks of 4 floats, placed as in step 4
__device__ __forceinline__ int a_at(int r, int k) { return r * BK + (((k / 4) ^ ((r / 2) % 4)) * 4) + k % 4; }
__device__ __forceinline__ int b_at(int k, int n) { return k * BN + (((n / 4) ^ (k % 8)) * 4) + n % 4; }

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

__device__ __forceinline__ unsigned tf32(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ unsigned tf32(unsigned bits) { return tf32(__uint_as_float(bits)); }

__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(NT)
tc_tf32(float* C, const float* A, const float* B, int M, int N, int K)
{
    static_assert(BK == 16 && BN % 32 == 0, "the swizzles assume 64-byte rows of A and rows of B of 128 bytes or more");
    static_assert(STAGES >= 2 && STAGES * (BM + BN) * BK * 4 <= 48 * 1024, "the stages must fit 48 KiB");
    __shared__ __align__(128) float As[STAGES][BM * BK];
    __shared__ __align__(128) float Bs[STAGES][BK * BN];
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x, lane = threadIdx.x, warp = threadIdx.y;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int g = lane / 4, t = lane % 4;
    const int tiles = K / BK;

    // this thread's copies, as in step 6: one 16-byte chunk of each pass of RA rows of A (RB k rows of B), in the
    // same column, so each pass adds a constant: A's swizzle repeats every 8 rows, B's every 8 k rows (two passes,
    // hence two offsets)
    static_assert(RA % 8 == 0 && RB == 4, "a pass of A keeps its swizzle, two passes of B make its period");
    const int ra = tid / (BK / 4), ka = (tid % (BK / 4)) * 4, kb = tid / (BN / 4), nb = (tid % (BN / 4)) * 4;
    const float* a_src = A + (size_t)(row0 + ra) * K + ka;
    const float* b_src = B + (size_t)kb * N + col0 + nb;
    const int a_dst = a_at(ra, ka), b_dst[2] = {b_at(kb, nb), b_at(kb + RB, nb) - RB * BN};
    auto copy_slab = [&](int stage, int kt) {   // issue the cp.asyncs of slab kt into buffer stage
        const float* a = a_src + kt * BK;
        const float* b = b_src + (size_t)kt * BK * N;
#pragma unroll
        for (int pass = 0; pass < BM / RA; ++pass)
            cp_async16(&As[stage][a_dst + pass * RA * BK], a + (size_t)pass * RA * K);
#pragma unroll
        for (int pass = 0; pass < BK / RB; ++pass)
            cp_async16(&Bs[stage][b_dst[pass % 2] + pass * RB * BN], b + (size_t)pass * RB * N);
    };

    // this lane's ldmatrix byte offsets of A in a stage, by k step: lane l points at row l % 16, floats
    // 4 (l / 16) .. + 3 of the 16 x 8 tile; the swizzle depends on the row only through (row / 2) % 4, the same
    // for every 16-row tile of the warp's
    unsigned a_ld[KSTEPS];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) a_ld[ks] = 4 * a_at(wrow + lane % 16, 8 * ks + (lane / 16) * 4);
    const unsigned as0 = smem(As);

    float acc[MI][NI][4] = {};
    unsigned a[2][MI][4], b[NI][2];   // two k steps of A's fragments: one multiplied while the next loads
    auto load_fragments = [&](int buf, int stage, int ks) {
        const unsigned sa = as0 + stage * (4 * BM * BK) + a_ld[ks];
#pragma unroll
        for (int i = 0; i < MI; ++i) {
            ldmatrix_x4(a[buf][i], sa + i * (4 * 16 * BK));
#pragma unroll
            for (int q = 0; q < 4; ++q) a[buf][i][q] = tf32(a[buf][i][q]);
        }
    };
    auto load_b = [&](int stage, int ks) {
        const float* bs = Bs[stage];
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            b[j][0] = tf32(bs[b_at(8 * ks + t, wcol + 8 * j + g)]);
            b[j][1] = tf32(bs[b_at(8 * ks + t + 4, wcol + 8 * j + g)]);
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
            load_b(read, ks);   // before the barrier of a slab's last step: `read` is still slab kt's
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
                for (int j = 0; j < NI; ++j) mma_tf32(acc[i][j], a[ks % 2][i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            float* c = &C[(size_t)(row0 + wrow + 16 * i + g) * N + col0 + wcol + 8 * j + 2 * t];
            *(float2*)c = make_float2(acc[i][j][0], acc[i][j][1]);
            *(float2*)(c + 8 * (size_t)N) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}
