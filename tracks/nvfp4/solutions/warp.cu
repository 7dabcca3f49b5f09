// Warp per row, shuffle reductions: the block's 8 warps take 8 rows, one each. Lane l reads 16-byte chunks l, l + 32,
// ... of its warp's row (a warp's load is still 512 consecutive bytes), decodes as the decode step does, and the
// warp adds its 32 partial sums with five __shfl_xor_sync: no shared-memory tree, no __syncthreads() but the one
// after the table is built.
// Hypothesis: a block per row spent its end in a shared-memory reduction, eight barriers with most threads idle, and
// a 256-thread block on a short row left threads with nothing to load; a warp per row reduces in registers, and a
// short row keeps only 32 threads busy rather than 256.
// The launch: 256 threads a block, 8 rows a block (TILE_Y = 8), one per warp.

__device__ __forceinline__ float e4m3_bits(unsigned b)
{
    return __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7Fu) << 20)) * 0x1p120f;
}

extern "C" __global__ void nvfp4_warp(float* y, const unsigned char* w, const unsigned char* scales,
                                      const float* tensor_scale, const float* x, int M, int K)
{
    __shared__ float lut[16];
    if (threadIdx.x < 16) {
        const unsigned c = threadIdx.x;
        lut[c] = __uint_as_float(((c & 8u) << 28) | ((c & 7u) << 22)) * 0x1p126f;
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.y * TILE_Y + warp, chunks = K / 32;
    if (row >= M) return;
    const uint4* wrow = reinterpret_cast<const uint4*>(w + (size_t)row * (K / 2));
    const unsigned short* srow = reinterpret_cast<const unsigned short*>(scales + (size_t)row * (K / 16));
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float sum = 0.0f;
    for (int c = lane; c < chunks; c += 32) {
        const uint4 v = wrow[c];
        const unsigned pair = srow[c];
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
        float half[2] = {0.0f, 0.0f};
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float4 xv = x4[8 * c + q];
            const unsigned word = words[q / 2] >> (16 * (q % 2));
            half[q / 4] += lut[word & 15] * xv.x + lut[(word >> 4) & 15] * xv.y + lut[(word >> 8) & 15] * xv.z
                           + lut[(word >> 12) & 15] * xv.w;
        }
        sum += half[0] * e4m3_bits(pair & 0xFF) + half[1] * e4m3_bits(pair >> 8);
    }
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = sum * tensor_scale[0];
}
