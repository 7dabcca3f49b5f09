// Paged decode attention on the tensor cores, the warps of a (KV head, sequence) block splitting its tokens (flash-
// decoding inside the block): each warp walks chunks of 16 x UNROLL tokens (warp w takes chunks w, w + WARPS, ...) with
// its own online softmax, and the warps' states meet once at the end in shared memory. Per 16 tokens a warp does
//   S (query heads x tokens) = Q K^T with mma.sync m16n8k16 bf16 (the group's <= 8 query heads as A's rows, the tokens
//     as B's 8 columns, two n-tiles): each lane loads whole 16-byte chunks of its token's K row straight from the
//     pages (B's k order is free: lane t's chunks are bytes 64v + 16t of the row; Q's A fragment, staged in shared
//     memory once, is read each chunk with the same permutation);
//   O^T (head_dim x heads) += V^T P^T with m16n8k16 (head_dim as M, the tokens as k, the heads as N): S's C fragment
//     is exactly P^T's B fragment (no shuffles), and V^T's A fragment is two bf16 of two tokens, one PRMT from the
//     16-byte chunks each lane loaded of its four tokens' V rows. P goes in as bf16 hi + lo (default, two mmas,
//     ~2^-17 relative) or bf16 alone (P_BF16 = 1: PyTorch's own rounding of P, one mma).
// The softmax is per 16 x UNROLL tokens (one max over a quad, one rescale of the accumulators), not per token.
// Hypothesis: the reference reaches 0.158 of HBM bandwidth because its token loop is compute- and latency-bound: a
// loop trip (8 token slots a warp at head_dim 128) is ~3,300 SASS instructions with the group's branches, hundreds
// a token, for dot products reduced by 4 shuffle rounds a query head, an exp2 and a rescale of 8 accumulators a head a
// token; the warp's next loads wait behind that compute; and at 208 registers an SM holds 2 blocks (8 warps). Here
// the head_dim-128 loop is ~414 instructions a warp per 16 tokens (8 KiB of K and V, ~26 a token; ~20 bytes an
// instruction against the ~14.5 bytes a cycle an H100 SM needs at 3.35 TB/s, so ~0.7 of 4 issue slots), and at 128
// registers (MINB = 4) an SM holds 4 blocks of 4 warps x 8 KiB in flight = 128 KiB; the perf shape's 512 blocks all
// fit at once (132 x 4 = 528 slots), so no block waits for a wave. A processor-sharing model of the perf shape's
// lengths (blocks as latency-bound streams under one bandwidth) puts the grid at 0.99 of the bandwidth-bound time once
// a block alone can pull >= 40 GB/s (32 KiB in flight at ~0.8 us).
// By default (NO_LPT = 1 turns it off) block (x, y) takes the y-th longest sequence (ties by index), so that with
// fewer slots than blocks the longest sequences start first (the same model: 0.78 -> 0.98 of the bound at 264 slots
// and 20 GB/s a block).
// The block table's used entries are staged in shared memory (a page lookup is then a load from shared memory, not a
// dependent L2 load in front of every K and V load); tokens past the length are neither loaded nor counted (K and V zero, score -inf).
// The launch: BLOCK_X threads (BLOCK_X / 32 warps), one block per (KV head, sequence), as the kind's grid fixes.

#ifndef UNROLL
#define UNROLL 1      // 16-token sub-chunks a warp loads before it computes
#endif
#ifdef P_BF16         // params={ P_BF16 = 1 }: P as bf16 alone
#define PSPLIT 0
#else                 // default: P as bf16 hi + lo
#define PSPLIT 1
#endif
#ifdef NO_LPT         // params={ NO_LPT = 1 }: block y takes sequence y
#define LPT 0
#else                 // default: longest sequences to the first blocks
#define LPT 1
#endif
#ifndef MINB
#define MINB 4        // __launch_bounds__' blocks an SM (registers <= 65536 / (BLOCK_X x MINB))
#endif
#define WARPS (BLOCK_X / 32)
#define MAX_GROUP 8   // query heads a KV head serves, at most (the mma's 8 columns)
#define TABLE_SMEM 1024
#define LOG2E 1.44269504f
#define NEG_INF __int_as_float(0xff800000)

// 16 bytes of a page, streamed past L1, or zeros where !live (a token past the sequence's length)
__device__ __forceinline__ uint4 ld_stream(const unsigned short* p, bool live)
{
    uint4 r;
    asm("{ .reg .pred q; setp.ne.b32 q, %5, 0;\n"
        " mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
        " @q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4]; }"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"((int)live));
    return r;
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// (lo, hi) as bf16x2, lo in the low half
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned word(const uint4& u, int i)
{
    return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}

// one warp's share of a (KV head, sequence): HD = head_dim (64 or 128)
template <int HD>
__device__ __forceinline__ void attend(float (*s_o)[128], float* s_l, float (*s_m)[MAX_GROUP], const int* s_table,
                                       const unsigned short* s_q,
                                       const unsigned short* q, const unsigned short* k_cache,
                                       const unsigned short* v_cache, const int* table, int b, int kvh, int len,
                                       int group, int q_heads, int kv_heads, int page_size)
{
    constexpr int KV = HD / 32;   // 16-byte chunks of a K row a lane loads (bytes 64v + 16t)
    constexpr int KS = HD / 16;   // k-steps of Q K^T
    constexpr int VC = HD / 64;   // 16-byte chunks of a V row a lane loads (chunks g, g + 8)
    constexpr int MT = HD / 16;   // M-tiles (16 dims) of O^T
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const size_t token_stride = (size_t)kv_heads * HD;
    const int head_off = kvh * HD;
    const float scale = rsqrtf((float)HD) * LOG2E;   // scores in log2 units
    const float inv_page = 1.0f / (float)page_size;
    const int* pages = len <= TABLE_SMEM * page_size ? s_table : table;   // the staged table, or the global one

    auto slot = [&](int tok) -> size_t {   // element offset of token tok's row of this KV head (tok < len)
        int p = __float2int_rz((float)tok * inv_page);   // tok / page_size, corrected by one either way
        p += (p + 1) * page_size <= tok;
        p -= p * page_size > tok;
        return (size_t)(pages[p] * page_size + tok - p * page_size) * token_stride + head_off;
    };

    // Q's A fragment (rows = query heads g; rows g + 8 are zero) is read from shared memory each chunk (16 fewer
    // registers): k-step ks holds words 2ks, 2ks + 1 of the lane's chunks (bytes 64v + 16t of the row), the same
    // words B takes from K
    const uint4* qrow = reinterpret_cast<const uint4*>(s_q + g * (HD + 8) + 8 * t);
    float m = NEG_INF, l = 0.0f;   // head g's running max (log2 units) and this lane's part of its sum
    float o[MT][4];                // O^T: rows = dims, columns = heads 2t, 2t + 1
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[i][c] = 0.0f;

    constexpr int CH = 16 * UNROLL;
    for (int base = warp * CH; base < len; base += WARPS * CH) {   // warp-uniform trip count
        uint4 kr[UNROLL][2][KV], vr[UNROLL][4][VC];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {   // K of token base + 16u + 8j + g (B's column g of n-tile j)
                const int tok = base + 16 * u + 8 * j + g;
                const unsigned short* row = k_cache + slot(min(tok, len - 1)) + 8 * t;
#pragma unroll
                for (int v = 0; v < KV; ++v) kr[u][j][v] = ld_stream(row + 32 * v, tok < len);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {   // V of tokens 2t, 2t + 1, 8 + 2t, 9 + 2t: k positions of A and B
                const int tok = base + 16 * u + 8 * (i / 2) + 2 * t + (i % 2);
                const unsigned short* row = v_cache + slot(min(tok, len - 1)) + 8 * g;
#pragma unroll
                for (int c = 0; c < VC; ++c) vr[u][i][c] = ld_stream(row + 64 * c, tok < len);
            }
        }

        // scores: s[u][j][e] = S[head g][token base + 16u + 8j + 2t + e] (C columns 2t, 2t + 1; rows g + 8 unused)
        float s[UNROLL][2][4];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#pragma unroll
                for (int c = 0; c < 4; ++c) s[u][j][c] = 0.0f;
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    const uint4 qv = qrow[4 * (ks / 2)];   // bytes 64 (ks / 2) + 16t of head g's row
                    mma_bf16(s[u][j], ks % 2 ? qv.z : qv.x, 0u, ks % 2 ? qv.w : qv.y, 0u,
                             word(kr[u][j][ks / 2], 2 * (ks % 2)), word(kr[u][j][ks / 2], 2 * (ks % 2) + 1));
                }
            }
        float mx = m;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int tok = base + 16 * u + 8 * j + 2 * t + e;
                    s[u][j][e] = tok < len ? s[u][j][e] * scale : NEG_INF;
                    mx = fmaxf(mx, s[u][j][e]);
                }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));   // finite: token base is live
        const float alpha = ex2(m - mx);                         // 0 on the first chunk (m = -inf)
        m = mx;
        l *= alpha;
        unsigned ph[UNROLL][2], pl[UNROLL][2];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float p0 = ex2(s[u][j][0] - mx), p1 = ex2(s[u][j][1] - mx);
                l += p0 + p1;
                ph[u][j] = pack_bf16(p0, p1);
                pl[u][j] = pack_bf16(p0 - __uint_as_float(ph[u][j] << 16), p1 - __uint_as_float(ph[u][j] & 0xffff0000u));
            }
        // O^T's columns are heads 2t and 2t + 1: their factors from lanes 4 (2t) and 4 (2t + 1)
        const float a0 = __shfl_sync(0xffffffffu, alpha, 8 * t), a1 = __shfl_sync(0xffffffffu, alpha, 8 * t + 4);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            o[i][0] *= a0;
            o[i][1] *= a1;
            o[i][2] *= a0;
            o[i][3] *= a1;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                unsigned x0, x1, x2, x3;   // V^T rows (dims) r0, r0 + 8 x k positions (tokens) 2t, 2t+1 | 2t+8, 2t+9
                if (HD == 128) {           // rows g, g + 8 = dims 8g + i, 8(g + 8) + i: element i of chunks g, g + 8
                    const int w = i / 2, sel = i % 2 ? 0x7632 : 0x5410;
                    x0 = __byte_perm(word(vr[u][0][0], w), word(vr[u][1][0], w), sel);
                    x1 = __byte_perm(word(vr[u][0][VC - 1], w), word(vr[u][1][VC - 1], w), sel);
                    x2 = __byte_perm(word(vr[u][2][0], w), word(vr[u][3][0], w), sel);
                    x3 = __byte_perm(word(vr[u][2][VC - 1], w), word(vr[u][3][VC - 1], w), sel);
                } else {                   // rows g, g + 8 = dims 8g + 2i, 8g + 2i + 1: word i of chunk g
                    x0 = __byte_perm(word(vr[u][0][0], i), word(vr[u][1][0], i), 0x5410);
                    x1 = __byte_perm(word(vr[u][0][0], i), word(vr[u][1][0], i), 0x7632);
                    x2 = __byte_perm(word(vr[u][2][0], i), word(vr[u][3][0], i), 0x5410);
                    x3 = __byte_perm(word(vr[u][2][0], i), word(vr[u][3][0], i), 0x7632);
                }
                mma_bf16(o[i], x0, x1, x2, x3, ph[u][0], ph[u][1]);
                if (PSPLIT) mma_bf16(o[i], x0, x1, x2, x3, pl[u][0], pl[u][1]);
            }
    }

    // the block's max a head, then each warp's sum and O^T rescaled to it and added in shared memory
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t == 0) s_m[warp][g] = m;
    __syncthreads();
    float top = NEG_INF;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) top = fmaxf(top, s_m[w][g]);   // finite: warp 0 holds token 0
    const float f = ex2(m - top);                                      // 0 for a warp with no tokens
    const float f0 = __shfl_sync(0xffffffffu, f, 8 * t), f1 = __shfl_sync(0xffffffffu, f, 8 * t + 4);
    const int h0 = 2 * t, h1 = 2 * t + 1;
    for (int w = 0; w < WARPS; ++w) {   // the warps in turn (shared fp32 atomics are CAS loops on sm_90)
        if (w == warp) {
            if (t == 0 && g < group) s_l[g] += l * f;
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int d0 = HD == 128 ? 8 * g + i : 8 * g + 2 * i;
                const int d1 = HD == 128 ? 8 * (g + 8) + i : 8 * g + 2 * i + 1;
                if (h0 < group) {
                    s_o[h0][d0] += o[i][0] * f0;
                    s_o[h0][d1] += o[i][2] * f0;
                }
                if (h1 < group) {
                    s_o[h1][d0] += o[i][1] * f1;
                    s_o[h1][d1] += o[i][3] * f1;
                }
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_X, MINB)
paged_decode(float* out, const unsigned short* q, const unsigned short* k_cache, const unsigned short* v_cache,
             const int* block_table, const int* seq_lens, int batch, int q_heads, int kv_heads, int head_dim,
             int page_size, int max_pages)
{
    __shared__ int s_table[TABLE_SMEM];              // the sequence's pages (first TABLE_SMEM); LPT's lengths
    __shared__ float s_o[MAX_GROUP][128];            // the block's sum of O (query head x dim)
    __shared__ float s_l[MAX_GROUP];
    __shared__ float s_m[WARPS][MAX_GROUP];
    __shared__ __align__(16) unsigned short s_q[MAX_GROUP * (128 + 8)];   // the group's q rows, padded by 16 bytes
    __shared__ int s_b;
    const int tid = threadIdx.x, kvh = blockIdx.x;
    int b = blockIdx.y;
#if LPT
    // rank of each sequence by (length descending, index ascending): a permutation; this block takes rank blockIdx.y
    for (int i0 = 0; i0 < batch; i0 += BLOCK_X) {
        const int i = i0 + tid;
        const int li = i < batch ? seq_lens[i] : 0;
        int rank = 0;
        for (int j0 = 0; j0 < batch; j0 += TABLE_SMEM) {
            __syncthreads();
            for (int j = tid; j < TABLE_SMEM && j0 + j < batch; j += BLOCK_X) s_table[j] = seq_lens[j0 + j];
            __syncthreads();
            const int n = min(TABLE_SMEM, batch - j0);
            for (int j = 0; j < n; ++j) {
                const int lj = s_table[j];
                rank += (lj > li) || (lj == li && j0 + j < i);
            }
        }
        if (i < batch && rank == (int)blockIdx.y) s_b = i;
    }
    __syncthreads();
    b = s_b;
#endif
    const int len = seq_lens[b];
    const int group = q_heads / kv_heads;
    const int pages = (len + page_size - 1) / page_size;
    const int* table = block_table + (size_t)b * max_pages;
    __syncthreads();   // LPT's reads of s_table are done
    for (int p = tid; p < pages && p < TABLE_SMEM; p += BLOCK_X) s_table[p] = table[p];
    for (int i = tid; i < MAX_GROUP * 128; i += BLOCK_X) (&s_o[0][0])[i] = 0.0f;
    if (tid < MAX_GROUP) s_l[tid] = 0.0f;
    for (int i = tid; i < MAX_GROUP * head_dim / 8; i += BLOCK_X) {   // 16 bytes each; heads past the group zero
        const int h = i / (head_dim / 8), c = i % (head_dim / 8);
        uint4 u = make_uint4(0, 0, 0, 0);
        if (h < group) u = *reinterpret_cast<const uint4*>(q + ((size_t)b * q_heads + kvh * group + h) * head_dim + 8 * c);
        *reinterpret_cast<uint4*>(s_q + h * (head_dim + 8) + 8 * c) = u;
    }
    __syncthreads();

    if (head_dim == 128)
        attend<128>(s_o, s_l, s_m, s_table, s_q, q, k_cache, v_cache, table, b, kvh, len, group, q_heads, kv_heads, page_size);
    else
        attend<64>(s_o, s_l, s_m, s_table, s_q, q, k_cache, v_cache, table, b, kvh, len, group, q_heads, kv_heads, page_size);
    __syncthreads();

    for (int i = tid; i < group * head_dim; i += BLOCK_X) {
        const int h = i / head_dim, d = i % head_dim;
        out[((size_t)b * q_heads + kvh * group + h) * head_dim + d] = s_o[h][d] / s_l[h];
    }
}
