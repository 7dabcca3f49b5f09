// The GEMV on the tensor cores: the weights decoded to fp16 pairs by a few integer instructions a word, scaled by
// their e4m3 block scale in one fp16 multiply a pair, and multiplied by x on mma.sync m16n8k16 (fp32 accumulation),
// with x split in two fp16 halves (x = hi + lo, 22 bits) as B's columns 0 and 1 (the other six zero).
// Decode: a code's magnitude bits (e1 e0 m) placed at bits 11-9 of an fp16 and its sign at bit 15 make the fp16 whose
// value is the code's times 2^-14 (subnormal codes included). For the even nibbles of a word, N = w & 0x0F0F0F0F and
// U = N + 7 (N & 0x08080808) move each sign bit three places up, beside its magnitude's top; (U << 9) & 0x8E008E00
// is then the fp16 pair of nibbles 0 and 4, (U << 1) & 0x8E008E00 that of nibbles 2 and 6; w >> 4 gives the odd ones:
// 15 instructions for 8 codes. The block scale (e4m3 to fp16 by one cvt for two, times 2^7 by an integer add) times
// a pair is exact in fp16 (at most 6 significant bits, 2^-14 to 21); the 2^7 / 2^-14 are undone with the tensor
// scale at the end. The mma takes A's k in any order that B's follows: lane t's 16 bytes of a row are k 32t .. 32t+31
// of the step, mma i of the step takes word i / 2's pairs (0, 4), (2, 6) or (1, 5), (3, 7).
// Hypothesis: the CUDA-core decode (three integer instructions and an FMA a value, about 4.5 a value in all) needs
// about 19 us of issue at 4096 x 32768 on 132 SMs at 1.98 GHz, over the H200's 15.7 us roof; here a value costs about
// 2 integer instructions, a quarter of an fp16 multiply and an eighth of an mma.
// The launch: BLOCK_X threads, TILE_Y rows a block (TILE_Y / 16 m-tiles, every warp all of them), each warp every
// WARPS-th step of 128 values of the block's range of K; SPLITS = TILE_X / 256 blocks (a cluster) share a row's K.
#define SPLITS (TILE_X / 256)
#define WARPS (BLOCK_X / 32)
#define MT (TILE_Y / 16)
#ifndef MINB
#define MINB 1
#endif

__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// (lo, hi) as an fp16 pair, lo in the low half
__device__ __forceinline__ unsigned pack_f16(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ float2 f16x2_to_float2(unsigned h)
{
    float2 f;
    asm("{ .reg .f16 lo, hi; mov.b32 {lo, hi}, %2; cvt.f32.f16 %0, lo; cvt.f32.f16 %1, hi; }"
        : "=f"(f.x), "=f"(f.y) : "r"(h));
    return f;
}

// four e4m3 bytes as two fp16 pairs: bytes 0, 1 in lo, bytes 2, 3 in hi (each exact)
__device__ __forceinline__ void e4m3_to_f16x2(unsigned x, unsigned& lo, unsigned& hi)
{
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.rn.f16x2.e4m3x2 %0, l; cvt.rn.f16x2.e4m3x2 %1, h; }"
        : "=r"(lo), "=r"(hi) : "r"(x));
}

__device__ __forceinline__ unsigned fma_f16x2(unsigned a, unsigned b, unsigned c)
{
    unsigned r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// the word's 8 codes as four fp16 pairs, each a code's value times 2^-14: (0, 4), (2, 6), (1, 5), (3, 7)
__device__ __forceinline__ void decode8(unsigned w, unsigned (&d)[4])
{
    constexpr unsigned LOW = 0x0F0F0F0Fu, SIGN = 0x08080808u, PAIR = 0x8E008E00u;
    const unsigned even = w & LOW, odd = (w >> 4) & LOW;
    const unsigned ue = even + 7u * (even & SIGN), uo = odd + 7u * (odd & SIGN);
    d[0] = (ue << 9) & PAIR;
    d[1] = (ue << 1) & PAIR;
    d[2] = (uo << 9) & PAIR;
    d[3] = (uo << 1) & PAIR;
}

__device__ __forceinline__ unsigned word(const uint4& u, int i)
{
    return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}

#if SPLITS > 1
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

__device__ __forceinline__ float remote_load(const float* p, unsigned rank)
{
    unsigned address;
    float value;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(address) : "r"((unsigned)__cvta_generic_to_shared(p)),
                 "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(value) : "r"(address) : "memory");
    return value;
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_X, MINB) nvfp4_registers(float* y, const unsigned char* w,
        const unsigned char* scales, const float* tensor_scale, const float* x, int M, int K)
{
    static_assert(TILE_Y % 16 == 0, "whole m-tiles of 16 rows");
    __shared__ float partial[WARPS][TILE_Y];
    __shared__ float total[TILE_Y];
#if SPLITS > 1
    const unsigned rank = cluster_rank();
#else
    const unsigned rank = 0;
#endif
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, chunks = K / 32;
    const int begin = (int)(rank * chunks / SPLITS), end = (int)((rank + 1) * chunks / SPLITS);   // in chunks of 32
    const int row0 = blockIdx.y * TILE_Y;
    const uint4* w4 = reinterpret_cast<const uint4*>(w);
    const unsigned short* s2 = reinterpret_cast<const unsigned short*>(scales);
    float acc[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;

    for (int c0 = begin + 4 * warp; c0 < end; c0 += 4 * WARPS) {   // a step: 4 chunks, lane t's is c0 + t
        const int c = c0 + t;
        const bool live = c < end;
        uint4 wv[MT][2];
        unsigned sv[MT][2];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {   // rows g and g + 8 of m-tile m
                const int row = row0 + 16 * m + g + 8 * h;
                const bool ok = live && row < M;
                const size_t at = (size_t)row * chunks + c;
                wv[m][h] = ok ? w4[at] : make_uint4(0u, 0u, 0u, 0u);
                sv[m][h] = ok ? s2[at] : 0u;
            }
        // B: x's 32 values of lane t's chunk as fp16 pairs in the decode's order, hi (column 0) or lo (column 1)
        unsigned b[8][2];
#pragma unroll
        for (int q = 0; q < 4; ++q) {   // word q: values 8q .. 8q + 7 of the chunk
            float4 xa = make_float4(0.f, 0.f, 0.f, 0.f), xb = xa;
            if (live && g < 2) {
                xa = reinterpret_cast<const float4*>(x)[8 * c + 2 * q];
                xb = reinterpret_cast<const float4*>(x)[8 * c + 2 * q + 1];
            }
            const float v[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
            const int order[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};   // decode8's pairs
            unsigned pairs[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                const float a0 = v[order[p][0]], a1 = v[order[p][1]];
                const unsigned hi = pack_f16(a0, a1);
                const float2 back = f16x2_to_float2(hi);
                const unsigned lo = pack_f16(a0 - back.x, a1 - back.y);
                pairs[p] = g == 0 ? hi : g == 1 ? lo : 0u;
            }
            b[2 * q][0] = pairs[0];       // mma 2q: pairs (0, 4) at k 2t, 2t+1 and (2, 6) at 2t+8, 2t+9
            b[2 * q][1] = pairs[1];
            b[2 * q + 1][0] = pairs[2];   // mma 2q + 1: (1, 5) and (3, 7)
            b[2 * q + 1][1] = pairs[3];
        }
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            unsigned scale[2][2];   // [row g, g + 8][block lo, hi] as fp16 pairs of the scale times 2^7, both halves
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                unsigned both, unused;
                e4m3_to_f16x2(sv[m][h], both, unused);
                both += 0x1C001C00u;   // times 2^7: the exponent of each (normal) half plus 7
                scale[h][0] = __byte_perm(both, 0u, 0x1010);
                scale[h][1] = __byte_perm(both, 0u, 0x3232);
            }
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                unsigned dg[4], dg8[4];
                decode8(word(wv[m][0], q), dg);
                decode8(word(wv[m][1], q), dg8);
                const int blk = q / 2;   // words 0, 1: values 0-15 (block lo); 2, 3: block hi
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    dg[p] = fma_f16x2(dg[p], scale[0][blk], 0u);
                    dg8[p] = fma_f16x2(dg8[p], scale[1][blk], 0u);
                }
                mma_f16(acc[m], dg[0], dg8[0], dg[1], dg8[1], b[2 * q][0], b[2 * q][1]);
                mma_f16(acc[m], dg[2], dg8[2], dg[3], dg8[3], b[2 * q + 1][0], b[2 * q + 1][1]);
            }
        }
    }
    // lane (g, 0) holds columns 0 and 1 (hi, lo) of rows g and g + 8 of each m-tile
    if (t == 0) {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            partial[warp][16 * m + g] = acc[m][0] + acc[m][1];
            partial[warp][16 * m + g + 8] = acc[m][2] + acc[m][3];
        }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < TILE_Y; r += BLOCK_X) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < WARPS; ++k) s += partial[k][r];
        total[r] = s;
    }
#if SPLITS > 1
    cluster_sync();   // every block's totals are written
#else
    __syncthreads();
#endif
    if (rank == 0) {
        for (int r = threadIdx.x; r < TILE_Y; r += BLOCK_X) {
            float s = total[r];
#if SPLITS > 1
            for (unsigned q = 1; q < SPLITS; ++q) s += remote_load(&total[r], q);
#endif
            if (row0 + r < M) y[row0 + r] = s * (tensor_scale[0] * 0x1p7f);   // W' = W x 2^-7
        }
    }
#if SPLITS > 1
    cluster_sync();   // block 0 has read them: the others may exit
#endif
}
