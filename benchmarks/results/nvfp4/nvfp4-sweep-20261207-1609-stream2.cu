// Stream the weights: x in registers, each warp a K-slice, rows in groups whose loads are all in flight at once.
// Hypothesis: the registers step reaches 0.23 of the H100's bandwidth because its loads come in short bursts: x is
// staged in shared memory 2048 values at a time between two barriers, so each warp has only 2-4 of its 16-byte loads
// in flight before it waits at a barrier. Here x never leaves registers: each lane holds the 32 values of x its chunk of
// K needs (for the whole block's rows), and issues the loads of GROUP rows before it decodes the first, so 16 warps an
// SM keep 64 KB of weights in flight. The decode is the registers step's: three integer instructions and an FMA a
// value. A group's GROUP partial sums are reduced across the warp in 9 shuffles (each step halves the rows a lane holds).
// The launch: a cluster of SPLITS = TILE_X / 256 blocks along K, TILE_Y rows a block; each warp of a block takes every
// WARPS-th run of 32 chunks of the block's range of K.
#define SPLITS (TILE_X / 256)
#define WARPS (BLOCK_X / 32)
#ifndef GROUP
#define GROUP 8
#endif
#ifndef MINB
#define MINB 1      // __launch_bounds__' blocks an SM
#endif
#ifndef PIPE
#define PIPE 0      // 1: the next group's loads are issued before this group's decode
#endif

__device__ __forceinline__ float e4m3_bits(unsigned b)
{
    return __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7Fu) << 20)) * 0x1p120f;
}

// an e2m1 code held in bits 31-28 of `top` as its value times 2^-126
__device__ __forceinline__ float e2m1_raw(unsigned top)
{
    return __int_as_float(((int)top >> 6) & (int)0x81C00000);
}

// one chunk (32 codes, two scale bytes) times x (held times 2^63): the true sum times 2^-63
__device__ __forceinline__ float chunk_dot(const uint4 v, unsigned pair, const float* xr)
{
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
    float lo = 0.0f, hi = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float d = 0.0f;
#pragma unroll
        for (int n = 0; n < 8; ++n) d += e2m1_raw(words[j] << (28 - 4 * n)) * xr[8 * j + n];
        if (j < 2) lo += d; else hi += d;
    }
    return lo * e4m3_bits(pair & 0xFF) + hi * e4m3_bits(pair >> 8);
}

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

__device__ __forceinline__ float remote_load(const float* p, unsigned rank)
{
    unsigned address;
    float value;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(address) : "r"((unsigned)__cvta_generic_to_shared(p)),
                 "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(value) : "r"(address) : "memory");
    return value;
}

// d[0..7], one partial sum of 8 rows in each lane: afterwards lanes 4r .. 4r + 3 (r = 0..7, counted as lane bits 4, 3,
// 2 from the top) hold row (4 b4 + 2 b3 + b2)'s sum over all 32 lanes
__device__ __forceinline__ float reduce8(const float* d, int lane)
{
    float a[4], b[2];
    const bool up16 = lane & 16, up8 = lane & 8, up4 = lane & 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float keep = up16 ? d[i + 4] : d[i], send = up16 ? d[i] : d[i + 4];
        a[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const float keep = up8 ? a[i + 2] : a[i], send = up8 ? a[i] : a[i + 2];
        b[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
    }
    const float keep = up4 ? b[1] : b[0], send = up4 ? b[0] : b[1];
    float e = keep + __shfl_xor_sync(0xffffffffu, send, 4);
    e += __shfl_xor_sync(0xffffffffu, e, 2);
    e += __shfl_xor_sync(0xffffffffu, e, 1);
    return e;
}

// the codes and scale pairs of chunk c of rows row .. row + GROUP - 1 (zeros past M or past the block's range)
__device__ __forceinline__ void load_group(uint4 (&v)[GROUP], unsigned (&s)[GROUP], const uint4* w4,
                                           const unsigned short* s2, int row, int c, int chunks, bool live, int M)
{
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
        const bool ok = live && row + g < M;
        const size_t at = (size_t)(row + g) * chunks + c;
        v[g] = ok ? w4[at] : make_uint4(0u, 0u, 0u, 0u);
        s[g] = ok ? s2[at] : 0u;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_X, MINB) nvfp4_registers(float* y, const unsigned char* w,
        const unsigned char* scales, const float* tensor_scale, const float* x, int M, int K)
{
    static_assert(GROUP == 8 && TILE_Y % GROUP == 0, "rows come in groups of 8");
    __shared__ float partial[WARPS][TILE_Y];
    __shared__ float total[TILE_Y];
    const unsigned rank = cluster_rank();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunks = K / 32;
    const int begin = (int)(rank * chunks / SPLITS), end = (int)((rank + 1) * chunks / SPLITS);
    const int row0 = blockIdx.y * TILE_Y;
    const uint4* w4 = reinterpret_cast<const uint4*>(w);
    const unsigned short* s2 = reinterpret_cast<const unsigned short*>(scales);
    for (int r = lane; r < TILE_Y; r += 32) partial[warp][r] = 0.0f;
    __syncwarp();
    for (int c0 = begin + 32 * warp; c0 < end; c0 += 32 * WARPS) {
        const int c = c0 + lane;
        const bool live = c < end;
        float xr[32];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 v = live ? reinterpret_cast<const float4*>(x)[8 * c + i] : make_float4(0.f, 0.f, 0.f, 0.f);
            xr[4 * i] = v.x * 0x1p63f; xr[4 * i + 1] = v.y * 0x1p63f;   // exact: a power of two
            xr[4 * i + 2] = v.z * 0x1p63f; xr[4 * i + 3] = v.w * 0x1p63f;
        }
        uint4 v[GROUP];
        unsigned s[GROUP];
        load_group(v, s, w4, s2, row0, c, chunks, live, M);
#pragma unroll 1
        for (int r0 = 0; r0 < TILE_Y; r0 += GROUP) {
            uint4 nv[GROUP];
            unsigned ns[GROUP];
            if (PIPE && r0 + GROUP < TILE_Y) load_group(nv, ns, w4, s2, row0 + r0 + GROUP, c, chunks, live, M);
            float d[GROUP];
#pragma unroll
            for (int g = 0; g < GROUP; ++g) d[g] = chunk_dot(v[g], s[g], xr);
            const float sum = reduce8(d, lane);
            if ((lane & 3) == 0) partial[warp][r0 + (lane >> 2)] += sum;   // lane 4r holds row r's sum
            if (r0 + GROUP < TILE_Y) {
                if (!PIPE) load_group(nv, ns, w4, s2, row0 + r0 + GROUP, c, chunks, live, M);
#pragma unroll
                for (int g = 0; g < GROUP; ++g) {
                    v[g] = nv[g];
                    s[g] = ns[g];
                }
            }
        }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < TILE_Y; r += BLOCK_X) {
        float t = 0.0f;
#pragma unroll
        for (int k = 0; k < WARPS; ++k) t += partial[k][r];
        total[r] = t;
    }
    cluster_sync();   // every block's totals are written
    if (rank == 0) {
        for (int r = threadIdx.x; r < TILE_Y; r += BLOCK_X) {
            float t = total[r];
            for (unsigned q = 1; q < SPLITS; ++q) t += remote_load(&total[r], q);
            if (row0 + r < M) y[row0 + r] = t * (tensor_scale[0] * 0x1p63f);   // the 2^-63 of x undone
        }
    }
    cluster_sync();   // block 0 has read them: the others may exit
}
