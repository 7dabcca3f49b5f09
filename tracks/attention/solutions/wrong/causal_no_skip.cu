// expect: flash_causal_score>=1 flash_causal_score<=1.04
// status: unmet
// The causal kernel that computes every key tile and masks afterwards: correct (a masked key gets -inf, so
// weight 0, wherever it is), but it does the unmasked kernel's work, twice what the mask leaves: its FP32
// instruction count at the perf shape is about that of flash_forward's reference, where skipping the tiles
// above the diagonal halves it. The counter rule (all the speed points at most 0.6 x, none at 1 x, a log scale
// between) leaves it its correctness point and at most 0.04 of speed: on the H200 it counted 331.47 G against the
// reference's 335.22 G, 1.011x fewer, log 1.011 / log 1.67 = 0.022, 0.02 in whole hundredths, times its 2 speed
// points (times the speed curve's share, 1 at its ratio of 0.031 to the provisional target 0.005).
extern "C" __global__ void flash_causal(float* out, const unsigned short* q, const unsigned short* k,
                                        const unsigned short* v, int batch, int heads, int seq_q, int seq_k,
                                        int head_dim)
{
    const float NEG_INF = __int_as_float(0xff800000);   // -infinity (NVRTC has no INFINITY here)
    constexpr int MAX_D = 128, KEYS = 32, ROWS = TILE_Y / BLOCK_Y, THREADS = BLOCK_X * BLOCK_Y;
    static_assert(BLOCK_X == 32 && TILE_X == KEYS, "one warp across a tile of 32 keys");
    static_assert(TILE_Y % BLOCK_Y == 0, "whole query rows per warp");
    __shared__ __align__(16) float q_s[TILE_Y][MAX_D + 4];
    __shared__ __align__(16) float k_s[KEYS][MAX_D + 4];
    __shared__ __align__(16) float v_s[KEYS][MAX_D];
    __shared__ float p_s[TILE_Y][KEYS];
    if (head_dim > MAX_D || head_dim % 32 != 0) return;   // the grader sends 64 and 128

    const int lane = threadIdx.x, warp = threadIdx.y, tid = warp * BLOCK_X + lane;
    const int q0 = blockIdx.x * TILE_Y;
    const long long bh = blockIdx.y;
    const unsigned short* qb = q + bh * seq_q * head_dim;
    const unsigned short* kb = k + bh * seq_k * head_dim;
    const unsigned short* vb = v + bh * seq_k * head_dim;
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int quads = head_dim / 4;   // 4 bf16 = 8 bytes: one load

    for (int i = tid; i < TILE_Y * quads; i += THREADS) {
        const int r = i / quads, c = 4 * (i % quads);
        float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (q0 + r < seq_q) {
            const uint2 raw = *reinterpret_cast<const uint2*>(qb + (long long)(q0 + r) * head_dim + c);
            f = make_float4(__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u),
                            __uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u));
        }
        *reinterpret_cast<float4*>(&q_s[r][c]) = make_float4(f.x * scale, f.y * scale, f.z * scale, f.w * scale);
    }

    float o[ROWS][MAX_D / 32], m[ROWS], l[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        m[r] = NEG_INF;
        l[r] = 0.0f;
#pragma unroll
        for (int t = 0; t < MAX_D / 32; ++t) o[r][t] = 0.0f;
    }

    for (int k0 = 0; k0 < seq_k; k0 += KEYS) {   // every tile, also those the mask hides from the whole block
        __syncthreads();   // the previous tile is no longer read (and, the first time, Q is loaded)
        for (int i = tid; i < KEYS * quads; i += THREADS) {
            const int j = i / quads, c = 4 * (i % quads);
            uint2 kr = make_uint2(0u, 0u), vr = make_uint2(0u, 0u);
            if (k0 + j < seq_k) {
                kr = *reinterpret_cast<const uint2*>(kb + (long long)(k0 + j) * head_dim + c);
                vr = *reinterpret_cast<const uint2*>(vb + (long long)(k0 + j) * head_dim + c);
            }
            *reinterpret_cast<float4*>(&k_s[j][c]) = make_float4(
                __uint_as_float(kr.x << 16), __uint_as_float(kr.x & 0xffff0000u),
                __uint_as_float(kr.y << 16), __uint_as_float(kr.y & 0xffff0000u));
            *reinterpret_cast<float4*>(&v_s[j][c]) = make_float4(
                __uint_as_float(vr.x << 16), __uint_as_float(vr.x & 0xffff0000u),
                __uint_as_float(vr.y << 16), __uint_as_float(vr.y & 0xffff0000u));
        }
        __syncthreads();

        float s[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) s[r] = 0.0f;
        for (int c = 0; c < head_dim; c += 4) {
            const float4 kv = *reinterpret_cast<const float4*>(&k_s[lane][c]);
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const float4 qv = *reinterpret_cast<const float4*>(&q_s[warp * ROWS + r][c]);
                s[r] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
            }
        }
        float alpha[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const int key = k0 + lane, row = q0 + warp * ROWS + r;
            const bool valid = key < seq_k && key <= row;
            float top = valid ? s[r] : NEG_INF;
            for (int off = 16; off > 0; off /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
            const float m_new = fmaxf(m[r], top);          // finite: key 0, in the first tile, is always seen
            const float p = valid ? expf(s[r] - m_new) : 0.0f;
            float sum = p;
            for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            alpha[r] = expf(m[r] - m_new);                 // 0 on the first tile (m = -inf)
            l[r] = l[r] * alpha[r] + sum;
            m[r] = m_new;
            p_s[warp * ROWS + r][lane] = p;
        }
        __syncwarp();   // the warp's p_s rows are written before any lane reads them
#pragma unroll
        for (int t = 0; t < MAX_D / 32; ++t)
#pragma unroll
            for (int r = 0; r < ROWS; ++r) o[r][t] *= alpha[r];
        for (int j = 0; j < KEYS; ++j) {   // each p and each V element read once per warp, used ROWS times
            float p[ROWS];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) p[r] = p_s[warp * ROWS + r][j];
#pragma unroll
            for (int t = 0; t < MAX_D / 32; ++t) {
                if (32 * t < head_dim) {
                    const float vv = v_s[j][lane + 32 * t];
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) o[r][t] += p[r] * vv;
                }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int row = q0 + warp * ROWS + r;
        if (row < seq_q) {
            float* dst = out + (bh * seq_q + row) * head_dim;
#pragma unroll
            for (int t = 0; t < MAX_D / 32; ++t)
                if (32 * t < head_dim) dst[lane + 32 * t] = o[r][t] / l[r];
        }
    }
}
