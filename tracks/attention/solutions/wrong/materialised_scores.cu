// expect: flash_forward_score=1
// status: unmet
// Attention that materialises S: each warp writes its rows' scores Q K^T / sqrt(d), rounded to bf16 as
// PyTorch's bf16 attention rounds them, to a global __device__ array (2 GiB: batch x heads x seq_q x seq_k
// at the speed shape), reads them back for the row's max, overwrites them with P = exp(s - m) (bf16 again)
// while summing, and reads P for P V. Correct, but the step forbids materialising S: its cubin holds 2 GiB of
// static global memory, which the attention kinds' SASS requirement no_global_scratch refuses (correctness
// point only).
__device__ unsigned short scores[1u << 30];   // every score of the speed shape, 4 x 16 x 4096 x 4096, in bf16

extern "C" __global__ void flash_forward(float* out, const unsigned short* q, const unsigned short* k,
                                         const unsigned short* v, int batch, int heads, int seq_q, int seq_k,
                                         int head_dim)
{
    const float NEG_INF = __int_as_float(0xff800000);   // -infinity (NVRTC has no INFINITY here)
    constexpr int MAX_D = 128, ROWS = TILE_Y / BLOCK_Y;
    static_assert(BLOCK_X == 32 && TILE_Y % BLOCK_Y == 0, "a warp per ROWS query rows");
    if (head_dim > MAX_D || head_dim % 32 != 0) return;   // the grader sends 64 and 128
    const int lane = threadIdx.x, warp = threadIdx.y;
    const long long bh = blockIdx.y;
    const unsigned short* kb = k + bh * seq_k * head_dim;
    const unsigned short* vb = v + bh * seq_k * head_dim;
    const float scale = 1.0f / sqrtf((float)head_dim);
    auto value = [](unsigned short x) { return __uint_as_float((unsigned)x << 16); };
    auto bf16 = [](float x) {   // x rounded to the nearest bf16 (ties to even), as its raw bits
        const unsigned u = __float_as_uint(x);
        return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    };

    for (int r = 0; r < ROWS; ++r) {
        const int row = blockIdx.x * TILE_Y + warp * ROWS + r;
        if (row >= seq_q) break;
        const unsigned short* qr = q + (bh * seq_q + row) * head_dim;
        unsigned short* s = scores + (bh * seq_q + row) * seq_k;
        float m = NEG_INF;
        for (int j = lane; j < seq_k; j += 32) {   // S's row, in global memory
            float dot = 0.0f;
            for (int c = 0; c < head_dim; ++c) dot += value(qr[c]) * value(kb[(long long)j * head_dim + c]);
            s[j] = bf16(dot * scale);
            m = fmaxf(m, value(s[j]));
        }
        for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        float l = 0.0f;
        for (int j = lane; j < seq_k; j += 32) {   // P's row, over S's
            const float p = expf(value(s[j]) - m);
            s[j] = bf16(p);
            l += p;
        }
        for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
        __syncwarp();   // every lane's P is written before any lane reads the whole row
        float o[MAX_D / 32] = {};
        for (int j = 0; j < seq_k; ++j) {
            const float p = value(s[j]);
#pragma unroll
            for (int t = 0; t < MAX_D / 32; ++t)
                if (32 * t < head_dim) o[t] += p * value(vb[(long long)j * head_dim + lane + 32 * t]);
        }
        __syncwarp();   // the row's P is read by every lane before the next row's scores are written
#pragma unroll
        for (int t = 0; t < MAX_D / 32; ++t)
            if (32 * t < head_dim) out[(bh * seq_q + row) * head_dim + lane + 32 * t] = o[t] / l;
    }
}
