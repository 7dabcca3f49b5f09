// W4A16 GEMV on the tensor cores with W as the mma's A operand and a LOP3 decode: y (batch x N) = x (batch x K, fp16)
// @ W^T by mma.sync m16n8k16 (fp16 in, fp32 accumulate) with 16 rows of W as A's rows and the batch as B's 8 columns
// (one n-tile at batch <= 8, two at <= 16), so batch 1 wastes 7 of 8 columns instead of the reference's 15 of 16 rows
// and takes half its mmas; each lane's C elements are its own two rows (g, g + 8), so it loads those rows' scales
// itself, early, with the codes.
// Decode (Marlin's int4 trick): a 32-bit word of 8 codes gives four fp16 pairs in 9 instructions, (w & 0x000f000f) |
// 0x6400 6400 = 1024 + q of codes 0 and 4 (minus 1032: q - 8, exact) and (w & 0x00f000f0) | 0x64006400 = 1024 + 16q
// of codes 1 and 5 (times 1/16 minus 72: q - 8, exact), then w >> 8 for codes 2, 6 and 3, 7; the reference spends ~20
// (a shift, an AND and an OR a code and a sub.f16x2 a pair). The mma pairs any k with any k as long as A and B agree, so
// x's fp16 pairs are permuted to the same (0, 4), (1, 5), (2, 6), (3, 7) order by one PRMT a pair, once a k-block,
// and reused by every m-tile.
// Hypothesis: the reference reaches 0.40 / 0.38 of a copy's bandwidth because its k loop issues ~1,370 instructions a
// warp a k-block (sm_90 SASS) for 4 KiB of codes, ~170 a lane's 16-byte chunk, its scale loads come after the mmas (a
// second dependent trip to memory every k-block), and at 184 registers an SM holds 2 blocks, 8 warps x 4 KiB = 32 KiB
// in flight where an H100 needs ~40 KiB and an H200 ~55 KiB an SM (4.8 TB/s x ~1.5 us / 132). Here the loop is ~525
// (one n-tile) or ~640 (two) instructions for the same 4 KiB, scales, codes and x are all loaded before the k-block's
// first decode, and 121 (or 128) registers give 4 blocks an SM: 16 warps x 4 KiB = 64 KiB of codes in flight; KU
// k-blocks a warp are loaded before any is used (TILE_Y x 64 x KU bytes a warp).
// The launch: BLOCK_X threads, TILE_Y rows of W a block (TILE_Y / 16 m-tiles), each warp all of them over every
// WARPS-th run of KU k-blocks; the warps' sums meet in shared memory (plain adds, warps in turn). Params: NB = 1 builds
// only the one-n-tile path (121 registers at TILE_Y = 64: 4 blocks an SM, the 448 blocks of N = 28672 in one wave of
// 528 slots; a batch over 8 takes passes over W), NB = 2 (default) both (the two-n-tile path 166 registers, 128 with
// MINB = 4 and 20 bytes spilled outside the k loop); MINB = __launch_bounds__' blocks an SM; PF = 1 adds L2::256B.
// At an H100's 3.35 TB/s the loop needs ~1.9 (one n-tile) or ~2.3 (two) of an SM's 4 issue slots a cycle, the
// reference's ~4.9 (more than it has: it cannot reach the roof at any occupancy); at an H200's 4.8 TB/s ~2.7 and ~3.3.

#define GROUP 128                 // values of a row a scale covers: one k-block
#define WARPS (BLOCK_X / 32)
#define MT (TILE_Y / 16)          // m-tiles of 16 rows a warp multiplies
#ifndef KU
#define KU 1                      // consecutive k-blocks a warp loads before it computes
#endif
#ifndef MINB
#define MINB 1                    // __launch_bounds__' blocks an SM
#endif
#ifndef NB
#define NB 2                      // n-tiles of 8 batch rows at most (1: batch <= 8 in one pass, more in passes over W)
#endif
#ifndef PF
#define PF 0                      // 1: the code loads ask L2 for 256-byte prefetches
#endif

// 16 bytes of codes, streamed past L1, or zeros where !live
__device__ __forceinline__ uint4 ld_codes(const unsigned char* p, bool live)
{
    uint4 r;
#if PF
    asm("{ .reg .pred q; setp.ne.b32 q, %5, 0;\n"
        " mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
        " @q ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4]; }"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"((int)live));
#else
    asm("{ .reg .pred q; setp.ne.b32 q, %5, 0;\n"
        " mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
        " @q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4]; }"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"((int)live));
#endif
    return r;
}

__device__ __forceinline__ uint4 ld_x(const unsigned short* p, bool live)
{
    uint4 r;
    asm("{ .reg .pred q; setp.ne.b32 q, %5, 0;\n"
        " mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
        " @q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4]; }"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"((int)live));
    return r;
}

__device__ __forceinline__ unsigned ld_scale(const unsigned short* p, bool live)
{
    unsigned short r;
    asm("{ .reg .pred q; setp.ne.b32 q, %2, 0;\n"
        " mov.b16 %0, 0;\n"
        " @q ld.global.nc.u16 %0, [%1]; }"
        : "=h"(r) : "l"(p), "r"((int)live));
    return r;
}

__device__ __forceinline__ float f16_to_float(unsigned h)
{
    float f;
    asm("{ .reg .f16 v; mov.b16 v, %1; cvt.f32.f16 %0, v; }" : "=f"(f) : "h"((unsigned short)h));
    return f;
}

__device__ __forceinline__ unsigned sub_f16x2(unsigned a, unsigned b)
{
    unsigned r;
    asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

__device__ __forceinline__ unsigned fma_f16x2(unsigned a, unsigned b, unsigned c)
{
    unsigned r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// (w & mask) | 0x64006400 in one LOP3 (written in C, the compiler spends two: one immediate a LOP3)
__device__ __forceinline__ unsigned lop3_and_or(unsigned w, unsigned mask)
{
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "r"(mask), "r"(0x64006400u));
    return r;
}

// the word's 8 codes (k 0..7, k 0 in the low nibble) as four fp16 pairs of q - 8: (0, 4), (1, 5), (2, 6), (3, 7)
__device__ __forceinline__ void decode8(unsigned w, unsigned (&d)[4])
{
    const unsigned w2 = w >> 8;
    const unsigned lo = lop3_and_or(w, 0x000f000fu), hi = lop3_and_or(w, 0x00f000f0u);
    const unsigned lo2 = lop3_and_or(w2, 0x000f000fu), hi2 = lop3_and_or(w2, 0x00f000f0u);
    d[0] = sub_f16x2(lo, 0x64086408u);               // 1024 + q - 1032
    d[1] = fma_f16x2(hi, 0x2c002c00u, 0xd480d480u);  // (1024 + 16q) / 16 - 72
    d[2] = sub_f16x2(lo2, 0x64086408u);
    d[3] = fma_f16x2(hi2, 0x2c002c00u, 0xd480d480u);
}

__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned word(const uint4& u, int i)
{
    return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}

// NBT n-tiles of 8 batch rows (1: batch <= 8, 2: batch <= 16)
template <int NBT>
__device__ __forceinline__ void gemv(float (*s_y)[16], const unsigned char* w, const unsigned short* scales,
                                     const unsigned short* x, int b0, int batch, int N, int K)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;   // A's rows g, g + 8 of each m-tile, B's column g; the lane's k chunk t
    const int n0 = blockIdx.y * TILE_Y, blocks = K / GROUP;
    const size_t row_bytes = (size_t)K / 2;

    float acc[MT][NBT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NBT; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

    for (int kb0 = warp * KU; kb0 < blocks; kb0 += WARPS * KU) {   // warp-uniform
        uint4 wq[KU][MT][2];      // codes of rows n0 + 16i + 8r + g, k-block kb0 + u, the lane's 32 k (16 bytes)
        unsigned sc[KU][MT][2];   // their scales (fp16 bits)
        uint4 xr[KU][NBT][4];      // x of batch row 8j + g at the same 32 k
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            const int kb = kb0 + u;
            const bool kl = kb < blocks;
            const int k = min(kb, blocks - 1) * GROUP + 32 * t;
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int n = n0 + 16 * i + 8 * r + g;
                    const bool live = kl && n < N;
                    const int nn = min(n, N - 1);
                    wq[u][i][r] = ld_codes(w + (size_t)nn * row_bytes + k / 2, live);
                    sc[u][i][r] = ld_scale(scales + (size_t)nn * blocks + min(kb, blocks - 1), live);
                }
#pragma unroll
            for (int j = 0; j < NBT; ++j) {
                const int bb = b0 + 8 * j + g;   // batch row
                const uint4* xp = reinterpret_cast<const uint4*>(x + (size_t)min(bb, batch - 1) * K + k);
#pragma unroll
                for (int v = 0; v < 4; ++v) xr[u][j][v] = ld_x(reinterpret_cast<const unsigned short*>(xp + v), kl && bb < batch);
            }
        }
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            if (kb0 + u >= blocks) break;   // warp-uniform
            // x pairs in the decode's order: word p of the lane's codes is k 8p .. 8p + 7, x words 4p .. 4p + 3
            unsigned xb[NBT][4][4];
#pragma unroll
            for (int j = 0; j < NBT; ++j)
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    const unsigned x01 = word(xr[u][j][p], 0), x23 = word(xr[u][j][p], 1);
                    const unsigned x45 = word(xr[u][j][p], 2), x67 = word(xr[u][j][p], 3);
                    xb[j][p][0] = __byte_perm(x01, x45, 0x5410);   // (k0, k4)
                    xb[j][p][1] = __byte_perm(x01, x45, 0x7632);   // (k1, k5)
                    xb[j][p][2] = __byte_perm(x23, x67, 0x5410);   // (k2, k6)
                    xb[j][p][3] = __byte_perm(x23, x67, 0x7632);   // (k3, k7)
                }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                float sum[NBT][4];
#pragma unroll
                for (int j = 0; j < NBT; ++j)
#pragma unroll
                    for (int c = 0; c < 4; ++c) sum[j][c] = 0.0f;
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    unsigned d0[4], d1[4];   // rows g and g + 8, k 8p .. 8p + 7 of the lane's 32
                    decode8(word(wq[u][i][0], p), d0);
                    decode8(word(wq[u][i][1], p), d1);
#pragma unroll
                    for (int e = 0; e < 2; ++e)   // k-step: A's k positions (2t, 2t+1) <- pair 2e, (2t+8, 2t+9) <- 2e+1
#pragma unroll
                        for (int j = 0; j < NBT; ++j)
                            mma_f16(sum[j], d0[2 * e], d1[2 * e], d0[2 * e + 1], d1[2 * e + 1], xb[j][p][2 * e],
                                    xb[j][p][2 * e + 1]);
                }
                const float s0 = f16_to_float(sc[u][i][0]), s1 = f16_to_float(sc[u][i][1]);
#pragma unroll
                for (int j = 0; j < NBT; ++j) {   // C: rows g (c0, c1) and g + 8 (c2, c3), batch columns 2t, 2t + 1
                    acc[i][j][0] += sum[j][0] * s0;
                    acc[i][j][1] += sum[j][1] * s0;
                    acc[i][j][2] += sum[j][2] * s1;
                    acc[i][j][3] += sum[j][3] * s1;
                }
            }
        }
    }

    // the warps' sums in turn into s_y[row][batch]
    for (int v = 0; v < WARPS; ++v) {
        if (v == warp) {
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NBT; ++j)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const int r = 16 * i + g + 8 * (c / 2), b = 8 * j + 2 * t + (c & 1);
                        s_y[r][b] += acc[i][j][c];
                    }
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_X, MINB)
w4a16_gemv(float* y, const unsigned char* w, const unsigned short* scales, const unsigned short* x, int batch, int N,
           int K)
{
    __shared__ float s_y[TILE_Y][16];   // the block's rows x a batch group of up to 16
    const int n0 = blockIdx.y * TILE_Y;
    for (int b0 = 0; b0 < batch; b0 += 8 * NB) {   // one pass at the spec's shapes (batch <= 8 NB)
        for (int i = threadIdx.x; i < TILE_Y * 16; i += BLOCK_X) (&s_y[0][0])[i] = 0.0f;
        __syncthreads();
#if NB == 1
        gemv<1>(s_y, w, scales, x, b0, batch, N, K);
#else
        if (batch - b0 <= 8)
            gemv<1>(s_y, w, scales, x, b0, batch, N, K);
        else
            gemv<2>(s_y, w, scales, x, b0, batch, N, K);
#endif
        const int rows = min(8 * NB, batch - b0);
        for (int i = threadIdx.x; i < TILE_Y * rows; i += BLOCK_X) {   // along the rows: coalesced
            const int b = i / TILE_Y, r = i % TILE_Y;
            if (n0 + r < N) y[(size_t)(b0 + b) * N + n0 + r] = s_y[r][b];
        }
        __syncthreads();
    }
}
