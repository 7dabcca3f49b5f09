// Paged decode attention: one block per (KV head, sequence) reads that head's K and V pages once for all the query
// heads that share it (grouped-query attention). Each token's K row is read as 16-byte chunks by head_dim / 8 lanes
// (16 for head_dim 128: two tokens a warp), its page found in the block table; the lanes of a token add their
// partial dot products with shuffles, and each (warp, token slot) keeps an online softmax (running max, sum and
// weighted V) per query head. The block's partial states are merged at the end, across a warp with shuffles, then
// across warps in shared memory. Hypothesis: decode reads the whole cache for one query, about 2 FLOPs per byte, so
// its time is the live tokens' bytes at the memory's bandwidth; the gather baseline first copies every sequence's
// pages into a padded contiguous cache (reading and writing max_len tokens a sequence) and then reads that copy, so
// reading the pages where they are saves those bytes. Nothing but other loads can hide a load's latency here, and
// at 200-odd registers a thread an SM holds two blocks (8 warps): each warp therefore loads the K and V of UNROLL
// token slots before it computes on the first, four times the bytes in flight of one slot at a time. The launch: 128
// threads a block (4 warps), one block per (KV head, sequence).

#define MAX_GROUP 8   // query heads a KV head serves, at most
#define UNROLL 4      // token slots a warp loads before it computes
#define WARPS (BLOCK_X / 32)
#define LOG2E 1.44269504f
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ void unpack8(uint4 u, float* f)
{
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// fold state (m2, l2, a2) into (m, l, a): the two running sums rescaled to the larger max
__device__ __forceinline__ void merge(float& m, float& l, float* a, float m2, float l2, const float* a2)
{
    const float mx = fmaxf(m, m2);
    const float c1 = m == NEG_INF ? 0.0f : exp2f(m - mx), c2 = m2 == NEG_INF ? 0.0f : exp2f(m2 - mx);
    l = l * c1 + l2 * c2;
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = a[i] * c1 + a2[i] * c2;
    m = mx;
}

extern "C" __global__ void paged_decode(float* out, const unsigned short* q, const unsigned short* k_cache,
                                        const unsigned short* v_cache, const int* block_table, const int* seq_lens,
                                        int batch, int q_heads, int kv_heads, int head_dim, int page_size,
                                        int max_pages)
{
    __shared__ float state[WARPS][MAX_GROUP][2 + 128];   // per warp and query head: max, sum, weighted V
    const int kvh = blockIdx.x, b = blockIdx.y;
    const int group = q_heads / kv_heads, lanes = head_dim / 8, per_warp = 32 / lanes;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int sub = lane / lanes, part = lane % lanes;   // the warp's token slot, the 16-byte chunk of a row
    const int len = seq_lens[b];
    const int* table = block_table + (size_t)b * max_pages;
    const size_t token_stride = (size_t)kv_heads * head_dim, page_stride = token_stride * page_size;
    const float scale = rsqrtf((float)head_dim) * LOG2E;   // scores in log2 units: exp2 in the softmax

    float qv[MAX_GROUP][8], acc[MAX_GROUP][8], m[MAX_GROUP], l[MAX_GROUP];
#pragma unroll
    for (int g = 0; g < MAX_GROUP; ++g) {
        m[g] = NEG_INF;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = qv[g][i] = 0.0f;
        if (g < group) {
            unpack8(*reinterpret_cast<const uint4*>(q + ((size_t)b * q_heads + kvh * group + g) * head_dim + part * 8),
                    qv[g]);
#pragma unroll
            for (int i = 0; i < 8; ++i) qv[g][i] *= scale;
        }
    }

    // UNROLL token slots a warp at a time: every slot's K and V loads are issued before the first is used, so each
    // thread has UNROLL times the bytes in flight (the warp visits the same tokens in the same order as one at a time)
    const int stride = WARPS * per_warp;
    for (int base = warp * per_warp; base < len; base += stride * UNROLL) {   // the same trip count across a warp
        uint4 kc[UNROLL], vc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int t = base + u * stride + sub;
            kc[u] = vc[u] = make_uint4(0, 0, 0, 0);
            if (t < len) {
                const size_t at = table[t / page_size] * page_stride + (t % page_size) * token_stride
                                  + (size_t)kvh * head_dim + part * 8;
                kc[u] = *reinterpret_cast<const uint4*>(k_cache + at);
                vc[u] = *reinterpret_cast<const uint4*>(v_cache + at);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const bool live = base + u * stride + sub < len;
            float k[8], v[8];
            unpack8(kc[u], k);
            unpack8(vc[u], v);
#pragma unroll
            for (int g = 0; g < MAX_GROUP; ++g) {
                if (g >= group) break;
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; ++i) s += qv[g][i] * k[i];
                for (int offset = lanes / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
                if (live) {
                    const float mx = fmaxf(m[g], s), c = exp2f(m[g] - mx), p = exp2f(s - mx);
                    l[g] = l[g] * c + p;
#pragma unroll
                    for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * c + p * v[i];
                    m[g] = mx;
                }
            }
        }
    }

    // the warp's token slots merged into slot 0 (lanes 0 .. lanes - 1)
#pragma unroll
    for (int g = 0; g < MAX_GROUP; ++g) {
        if (g >= group) break;
        for (int offset = lanes; offset < 32; offset *= 2) {
            float a2[8];
            const float m2 = __shfl_xor_sync(0xffffffffu, m[g], offset), l2 = __shfl_xor_sync(0xffffffffu, l[g], offset);
#pragma unroll
            for (int i = 0; i < 8; ++i) a2[i] = __shfl_xor_sync(0xffffffffu, acc[g][i], offset);
            merge(m[g], l[g], acc[g], m2, l2, a2);
        }
        if (sub == 0) {
            if (part == 0) {
                state[warp][g][0] = m[g];
                state[warp][g][1] = l[g];
            }
#pragma unroll
            for (int i = 0; i < 8; ++i) state[warp][g][2 + part * 8 + i] = acc[g][i];
        }
    }
    __syncthreads();

    // warp 0's first slot merges the other warps' states and writes the group's outputs
    if (warp != 0 || sub != 0) return;
#pragma unroll
    for (int g = 0; g < MAX_GROUP; ++g) {
        if (g >= group) break;
        for (int w = 1; w < WARPS; ++w) merge(m[g], l[g], acc[g], state[w][g][0], state[w][g][1], &state[w][g][2 + part * 8]);
        float* o = out + ((size_t)b * q_heads + kvh * group + g) * head_dim + part * 8;
        const float inv = 1.0f / l[g];
        reinterpret_cast<float4*>(o)[0] = make_float4(acc[g][0] * inv, acc[g][1] * inv, acc[g][2] * inv, acc[g][3] * inv);
        reinterpret_cast<float4*>(o)[1] = make_float4(acc[g][4] * inv, acc[g][5] * inv, acc[g][6] * inv, acc[g][7] * inv);
    }
}
