// expect: w4a16_b1_score=0
// status: incorrect
// The int4 nibbles swapped: each byte's high nibble is taken as the even k and its low nibble as the odd one, the
// order of a packing other than this problem's (and torch's), so every pair of neighbouring weights is exchanged.

// two fp16 values (lo in the low half) as floats
__device__ __forceinline__ float2 f16x2_to_float2(unsigned h)
{
    float lo, hi;
    asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }" : "=f"(lo), "=f"(hi) : "r"(h));
    return make_float2(lo, hi);
}

#define GROUP 128
#define MAX_BATCH 16

// the 8 codes of a word, even k in the low nibble, as q - 8
__device__ __forceinline__ void decode8(unsigned word, float* w)
{
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = __uint_as_float(0x4B000000u | ((word >> (4 * (j ^ 1))) & 15u)) - 8388616.0f;
}

extern "C" __global__ void w4a16_gemv(float* y, const unsigned char* w, const unsigned short* scales,
                                      const unsigned short* x, int batch, int N, int K)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.y * TILE_Y + warp;
    if (n >= N) return;
    const uint4* row = reinterpret_cast<const uint4*>(w + (size_t)n * (K / 2));
    const unsigned short* srow = scales + (size_t)n * (K / GROUP);
    float acc[MAX_BATCH];
#pragma unroll
    for (int b = 0; b < MAX_BATCH; ++b) acc[b] = 0.0f;

    for (int c = lane; c < K / 32; c += 32) {
        const uint4 chunk = row[c];
        float wv[32];
        decode8(chunk.x, wv);
        decode8(chunk.y, wv + 8);
        decode8(chunk.z, wv + 16);
        decode8(chunk.w, wv + 24);
        const float scale = f16x2_to_float2(srow[c * 32 / GROUP]).x;
#pragma unroll
        for (int b = 0; b < MAX_BATCH; ++b) {
            if (b >= batch) break;
            const uint4* xs = reinterpret_cast<const uint4*>(x + (size_t)b * K + c * 32);
            float partial = 0.0f;
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                const uint4 h = xs[v];
                const unsigned hs[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float2 xf = f16x2_to_float2(hs[i]);
                    partial += wv[v * 8 + 2 * i] * xf.x + wv[v * 8 + 2 * i + 1] * xf.y;
                }
            }
            acc[b] += partial * scale;
        }
    }
#pragma unroll
    for (int b = 0; b < MAX_BATCH; ++b) {
        if (b >= batch) break;
        float s = acc[b];
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        if (lane == 0) y[(size_t)b * N + n] = s;
    }
}
