// Decode in registers: the cluster step without the table. A code's value comes from three integer instructions
// on the word that holds it (a shift that puts its nibble in bits 31-28, an arithmetic shift by 6, a mask: the
// float whose bits they leave is the value times 2^-126, subnormal codes included), and the 2^126 that would undo
// it is folded away: x is staged in shared memory times 2^63 (exact: a power of two), so each product is the true
// one times 2^-63, a normal float, and the row's sum is multiplied back by 2^63 with the tensor scale.
// Hypothesis: at 85% of the H200's bandwidth (4.8 TB/s at its peak) an SM must take in 25 to 30 values a clock; the
// table costs a 32-bit shared-memory load a value, and the shared-memory pipe serves one warp-wide 32-bit load a clock,
// shared with the LDS.128 of x, so the table, not HBM, is the limit. An SM issues four warp instructions a clock: three
// integer instructions and an FMA a value fit, and leave the shared-memory pipe to x.
// The launch: a cluster of 4 x 1 blocks of 256 threads, TILE_X / 256 = 4 blocks along K, 16 rows a block.
#define XCHUNK 2048
#define SPLITS (TILE_X / 256)

__device__ __forceinline__ float e4m3_bits(unsigned b)
{
    return __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7Fu) << 20)) * 0x1p120f;
}

// an e2m1 code held in bits 31-28 of `top` as its value times 2^-126: an arithmetic shift by 6 copies the sign
// into bits 31-25 and brings the exponent and mantissa bits to 24-22; the mask keeps bit 31 and bits 24-22
__device__ __forceinline__ float e2m1_raw(unsigned top)
{
    return __int_as_float(((int)top >> 6) & (int)0x81C00000);
}

// the two 16-value blocks of one chunk times x (staged times 2^63), each sum 2^-63 times its true value
__device__ __forceinline__ void chunk_dot(const uint4 v, const float4* xs, float& lo, float& hi)
{
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
    lo = hi = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; ++q) {   // values 4q .. 4q + 3: nibbles 4 (q % 2) .. 4 (q % 2) + 3 of word q / 2
        const float4 xv = xs[q];
        const unsigned word = words[q / 2];
        const int n = 4 * (q % 2);
        const float d = e2m1_raw(word << (28 - 4 * n)) * xv.x + e2m1_raw(word << (24 - 4 * n)) * xv.y
                        + e2m1_raw(word << (20 - 4 * n)) * xv.z + e2m1_raw(word << (16 - 4 * n)) * xv.w;
        if (q < 4) lo += d; else hi += d;
    }
}

// every thread of the cluster's blocks arrives (its shared-memory writes released) and waits for all the others
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

// *p in the shared memory of block `rank` of the cluster
__device__ __forceinline__ float remote_load(const float* p, unsigned rank)
{
    unsigned address;
    float value;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(address) : "r"((unsigned)__cvta_generic_to_shared(p)),
                 "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(value) : "r"(address) : "memory");
    return value;
}

extern "C" __global__ void nvfp4_registers(float* y, const unsigned char* w, const unsigned char* scales,
                                         const float* tensor_scale, const float* x, int M, int K)
{
    __shared__ __align__(16) float xs[XCHUNK];
    __shared__ float partial[TILE_Y];
    const unsigned rank = cluster_rank();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunks = K / 32;
    const int begin = 32 * (int)(rank * chunks / SPLITS), end = 32 * (int)((rank + 1) * chunks / SPLITS);
    const int row = blockIdx.y * TILE_Y + 2 * warp;
    const bool first = row < M, second = row + 1 < M;
    const uint4* w4 = reinterpret_cast<const uint4*>(w);
    const unsigned short* s2 = reinterpret_cast<const unsigned short*>(scales);
    const uint4 none = make_uint4(0u, 0u, 0u, 0u);
    float sum0 = 0.0f, sum1 = 0.0f;
    for (int k0 = begin; k0 < end; k0 += XCHUNK) {
        const int length = min(XCHUNK, end - k0);
        __syncthreads();
        for (int i = threadIdx.x; i < length / 4; i += BLOCK_X) {
            float4 v = reinterpret_cast<const float4*>(x + k0)[i];
            v.x *= 0x1p63f; v.y *= 0x1p63f; v.z *= 0x1p63f; v.w *= 0x1p63f;   // exact: a power of two
            reinterpret_cast<float4*>(xs)[i] = v;
        }
        __syncthreads();
        for (int c = lane; c < length / 32; c += 32) {
            const size_t at = (size_t)row * chunks + k0 / 32 + c;
            const uint4 v0 = first ? w4[at] : none, v1 = second ? w4[at + chunks] : none;
            const unsigned p0 = first ? s2[at] : 0u, p1 = second ? s2[at + chunks] : 0u;
            const float4* xc = reinterpret_cast<const float4*>(xs) + 8 * c;
            float lo, hi;
            chunk_dot(v0, xc, lo, hi);
            sum0 += lo * e4m3_bits(p0 & 0xFF) + hi * e4m3_bits(p0 >> 8);
            chunk_dot(v1, xc, lo, hi);
            sum1 += lo * e4m3_bits(p1 & 0xFF) + hi * e4m3_bits(p1 >> 8);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        sum0 += __shfl_xor_sync(0xffffffffu, sum0, offset);
        sum1 += __shfl_xor_sync(0xffffffffu, sum1, offset);
    }
    if (lane == 0) {
        partial[2 * warp] = sum0;
        partial[2 * warp + 1] = sum1;
    }
    cluster_sync();   // every block's partials are written
    if (rank == 0 && threadIdx.x < TILE_Y) {
        float total = partial[threadIdx.x];
        for (unsigned r = 1; r < SPLITS; ++r) total += remote_load(&partial[threadIdx.x], r);
        const int out = blockIdx.y * TILE_Y + threadIdx.x;
        if (out < M) y[out] = total * (tensor_scale[0] * 0x1p63f);   // the 2^-63 of x's staging undone
    }
    cluster_sync();   // block 0 has read them: the others may exit
}
