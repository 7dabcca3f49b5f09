// expect: w4a16_b1_score=0
// status: incorrect
// The int4 nibbles swapped: each byte's high nibble is taken as the even k and its low nibble as the odd one, the
// order of a packing other than this problem's (and torch's), so every pair of neighbouring weights is exchanged.

#define GROUP 128                 // values of a row a scale covers: one k-block
#define WARPS (BLOCK_X / 32)
#define NT (TILE_Y / 8)           // n-tiles of 8 rows a warp multiplies

__device__ __forceinline__ unsigned sub_f16x2(unsigned a, unsigned b)
{
    unsigned r;
    asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// two codes as fp16x2 (q_lo - 8, q_hi - 8): 0x6400 | q is the fp16 1024 + q
__device__ __forceinline__ unsigned decode2(unsigned lo, unsigned hi)
{
    return sub_f16x2(0x64006400u | lo | (hi << 16), 0x64086408u);
}

// two fp16 values (lo in the low half) as floats
__device__ __forceinline__ float2 f16x2_to_float2(unsigned h)
{
    float lo, hi;
    asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }" : "=f"(lo), "=f"(hi) : "r"(h));
    return make_float2(lo, hi);
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void w4a16_gemv(float* y, const unsigned char* w, const unsigned short* scales,
                                      const unsigned short* x, int batch, int N, int K)
{
    __shared__ float partial[WARPS][NT][4][32];   // each warp's C fragments, summed by warp 0
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;        // the fragment's group (a row of A, a column of B) and its quad lane
    const int n0 = blockIdx.y * TILE_Y, blocks = K / GROUP;

    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[j][c] = 0.0f;

    for (int kb = warp; kb < blocks; kb += WARPS) {
        const int k = kb * GROUP + 32 * t;       // this lane's 32 k of the block
        uint4 wq[NT];                            // W's codes: row n0 + 8j + g, k .. k + 31
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int n = n0 + 8 * j + g;
            wq[j] = n < N ? *reinterpret_cast<const uint4*>(w + (size_t)n * (K / 2) + k / 2) : make_uint4(0, 0, 0, 0);
        }
        unsigned xa[2][16];                      // x rows g and g + 8 (batch rows), k .. k + 31: two fp16 a word
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int b = g + 8 * r;
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                const uint4 u = b < batch ? reinterpret_cast<const uint4*>(x + (size_t)b * K + k)[v]
                                          : make_uint4(0, 0, 0, 0);
                xa[r][4 * v] = u.x;
                xa[r][4 * v + 1] = u.y;
                xa[r][4 * v + 2] = u.z;
                xa[r][4 * v + 3] = u.w;
            }
        }
        float sum[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) sum[j][c] = 0.0f;
#pragma unroll
        for (int s = 0; s < 8; ++s) {            // codes 4s .. 4s + 3 of each lane's 32
            const unsigned a[4] = {xa[0][2 * s], xa[1][2 * s], xa[0][2 * s + 1], xa[1][2 * s + 1]};
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const unsigned words[4] = {wq[j].x, wq[j].y, wq[j].z, wq[j].w};
                const unsigned codes = words[s / 2] >> (16 * (s % 2));   // four codes, k + 4s first
                mma_f16(sum[j], a, decode2((codes >> 4) & 15u, codes & 15u),     // high nibble taken as the even k
                        decode2((codes >> 12) & 15u, (codes >> 8) & 15u));
            }
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {           // C columns 2t and 2t + 1 of n-tile j: rows n0 + 8j + 2t (+ 1) of W
            const int n = n0 + 8 * j + 2 * t;
            const float s0 = n < N ? f16x2_to_float2(scales[(size_t)n * blocks + kb]).x : 0.0f;
            const float s1 = n + 1 < N ? f16x2_to_float2(scales[(size_t)(n + 1) * blocks + kb]).x : 0.0f;
            acc[j][0] += sum[j][0] * s0;
            acc[j][1] += sum[j][1] * s1;
            acc[j][2] += sum[j][2] * s0;
            acc[j][3] += sum[j][3] * s1;
        }
    }

#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) partial[warp][j][c][lane] = acc[j][c];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {            // c0, c1: batch row g; c2, c3: g + 8; columns 2t + (c & 1)
            float total = acc[j][c];
            for (int v = 1; v < WARPS; ++v) total += partial[v][j][c][lane];
            const int b = g + 8 * (c / 2), n = n0 + 8 * j + 2 * t + (c & 1);
            if (b < batch && n < N) y[(size_t)b * N + n] = total;
        }
    }
}
