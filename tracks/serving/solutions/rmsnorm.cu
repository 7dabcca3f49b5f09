// RMSNorm fused with the residual add: one block per row reads x and the residual once (16-byte loads, 8 bf16
// each), writes h = x + residual, sums h^2 in fp32 while the row sits in registers, reduces the sum across the
// block (shuffles, then one value a warp in shared memory), and writes y = h / sqrt(mean(h^2) + eps) * weight
// from the same registers. Hypothesis: the eager sequence (the add, then LlamaRMSNorm's cast to fp32, square,
// mean, rsqrt, multiply, cast back and scale: nine kernels) moves 42 bytes an element where the fused kernel moves
// 8 (x and the residual read, h and y written); a memory-bound kernel's time is its bytes, so fusing is worth
// about that factor, 5x. The
// launch: 256 threads a block, one row a block (TILE_Y = 1); rows up to 8192 values stay in registers (four
// 16-byte vectors a thread), longer rows read the rest of h back from out.

#define EPS 1e-6f
#define CACHED 4   // 16-byte vectors of h a thread keeps in registers

__device__ __forceinline__ float lo_bf16(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_bf16(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

// two floats rounded to bf16 (nearest even) in one word, lo in the low half
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned add_bf16x2(unsigned a, unsigned b)
{
    return pack_bf16(lo_bf16(a) + lo_bf16(b), hi_bf16(a) + hi_bf16(b));
}

__device__ __forceinline__ float squares(uint4 v)
{
    float s = 0.0f;
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) s += lo_bf16(w[i]) * lo_bf16(w[i]) + hi_bf16(w[i]) * hi_bf16(w[i]);
    return s;
}

__device__ __forceinline__ uint4 normalise(uint4 h, uint4 g, float inv)
{
    const unsigned a[4] = {h.x, h.y, h.z, h.w}, b[4] = {g.x, g.y, g.z, g.w};
    unsigned r[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
        r[i] = pack_bf16(lo_bf16(a[i]) * inv * lo_bf16(b[i]), hi_bf16(a[i]) * inv * hi_bf16(b[i]));
    return make_uint4(r[0], r[1], r[2], r[3]);
}

extern "C" __global__ void rmsnorm_fused(unsigned short* out, const unsigned short* x, const unsigned short* residual,
                                         const unsigned short* weight, int rows, int cols)
{
    __shared__ float partial[BLOCK_X / 32];
    const int row = blockIdx.y;
    if (row >= rows) return;
    const int vectors = cols / 8;
    const size_t start = (size_t)row * cols;
    const uint4* xr = reinterpret_cast<const uint4*>(x + start);
    const uint4* rr = reinterpret_cast<const uint4*>(residual + start);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* hout = reinterpret_cast<uint4*>(out + start);
    uint4* yout = reinterpret_cast<uint4*>(out + (size_t)rows * cols + start);

    uint4 kept[CACHED];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < CACHED; ++i) {
        const int v = threadIdx.x + i * BLOCK_X;
        if (v < vectors) {
            const uint4 a = xr[v], b = rr[v];
            kept[i] = make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z),
                                 add_bf16x2(a.w, b.w));
            hout[v] = kept[i];
            sum += squares(kept[i]);
        }
    }
    for (int v = threadIdx.x + CACHED * BLOCK_X; v < vectors; v += BLOCK_X) {
        const uint4 a = xr[v], b = rr[v];
        const uint4 h = make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z),
                                   add_bf16x2(a.w, b.w));
        hout[v] = h;
        sum += squares(h);
    }

    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    sum = 0.0f;
#pragma unroll
    for (int w = 0; w < BLOCK_X / 32; ++w) sum += partial[w];
    const float inv = rsqrtf(sum / cols + EPS);

#pragma unroll
    for (int i = 0; i < CACHED; ++i) {
        const int v = threadIdx.x + i * BLOCK_X;
        if (v < vectors) yout[v] = normalise(kept[i], wv[v], inv);
    }
    for (int v = threadIdx.x + CACHED * BLOCK_X; v < vectors; v += BLOCK_X) yout[v] = normalise(hout[v], wv[v], inv);
}
