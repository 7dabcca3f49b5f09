// Stream the rows through registers, decoded as fp16 bytes: no shared memory for x and no table. Each lane holds the
// 32 values of x of one chunk in registers and streams the block's 16 rows past them, the 16-byte loads of 8 rows in
// flight at once; each code becomes the high byte of an fp16, four decoded codes a 32-bit word.
// - Why fp16 bytes: an e2m1 code s e1 e0 m written as the fp16 bits s 0 0 0 e1 e0 m 0 | 0 0 0 0 0 0 0 0 is exactly the
// code's value times 2^-14 (code 1, 0.5, is the fp16 subnormal 2^-15), so a whole decoded value fits in one byte: the
// sign at bit 7, the magnitude at bits 3-1, four bits below it. A byte of w holds two codes whose signs are also four
// bits apart (bits 3 and 7), so one masked word of signs, s = w & 0x88888888, serves all eight codes of a word: the
// odd codes' signs are already at bit 7 of their byte (the magnitude comes from w >> 3), the even ones' are at bit 7 of
// s << 4 (the magnitude from w << 1). One LOP3 each merges them: 3 shifts and 3 LOP3 build 8 decoded codes, 4 PRMT
// move them into the high bytes of fp16 pairs, and cvt.f32.f16 (HADD2.F32, on the FMA pipes) widens each, exactly.
// With the FFMAs that is 26 instructions a word of 8 codes; a float's sign and magnitude are 6 bits further apart,
// which costs the registers step three integer instructions for every value.
// - The block scales of two rows (two e4m3 pairs, one 32-bit word) become two fp16 pairs with cvt.rn.f16x2.e4m3x2
// (exact: every finite e4m3 is an fp16) and floats with cvt.f32.f16. The row's sum is multiplied by 2^14 and the
// tensor scale at the end.
// - The loads are not predicated: a row past M reads row M - 1 and a lane past its block's range of K reads the range's
// last chunk, so every address is inside w and scales; that row's sum is never stored, and that lane's x is 0, so it
// adds 0. No zero fills, no selects. Each address is one 32-bit index (row x K / 32 + chunk).
// - Each lane ends a group with 8 partial sums, one a row; 9 shuffles leave each row's warp sum in one lane, and the
// block's warps add theirs in shared memory. Split-K across a cluster of 2: block r of the cluster takes the r-th half
// of K; after a cluster barrier block 0 adds block 1's row totals from its shared memory (mapa, ld.shared::cluster)
// and writes y, and a second barrier keeps block 1's shared memory alive until it has.
// Hypothesis: with the table gone the decode's issue, not HBM, still limits the registers step: three integer
// instructions and an FMA a value, plus addresses, predicates, zero fills and x's staging through shared memory, are
// near what an SM issues at 85% of the bandwidth. The fp16-byte decode needs 3.25 instructions a value with its FMA,
// half of them off the integer pipe, and the loop around it less than one more, so more of the issue slots are left
// for loads in flight.
// The launch: a cluster of 2 x 1 blocks of 128 threads, TILE_X / 256 = 2 blocks along K, 16 rows a block.
#define SPLITS (TILE_X / 256)
#define WARPS (BLOCK_X / 32)
#define GROUP 8   // rows whose loads are in flight together

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

// an fp16 pair as two floats (exact): the low half in .x
__device__ __forceinline__ float2 f16x2_to_float2(unsigned h)
{
    float2 f;
    asm("{ .reg .f16 lo, hi; mov.b32 {lo, hi}, %2; cvt.f32.f16 %0, lo; cvt.f32.f16 %1, hi; }"
        : "=f"(f.x), "=f"(f.y) : "r"(h));
    return f;
}

// four e4m3 bytes as two fp16 pairs: bytes 0, 1 in lo, bytes 2, 3 in hi (each exact)
__device__ __forceinline__ void e4m3_to_f16x2(unsigned x, unsigned& lo, unsigned& hi)
{
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.rn.f16x2.e4m3x2 %0, l; cvt.rn.f16x2.e4m3x2 %1, h; }"
        : "=r"(lo), "=r"(hi) : "r"(x));
}

// v, its bits hidden from the compiler (an empty asm): the sign word is computed once and shifted, where NVRTC would
// rebuild each shifted copy from w with its own mask
__device__ __forceinline__ unsigned opaque(unsigned v)
{
    asm("" : "+r"(v));
    return v;
}

// the bits of a where mask is set, of b elsewhere: one LOP3 (NVRTC makes two instructions of the C form)
__device__ __forceinline__ unsigned bitselect(unsigned a, unsigned b, unsigned mask)
{
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(r) : "r"(a), "r"(b), "r"(mask));
    return r;
}

// the 8 codes of word w (code n in bits 4n .. 4n + 3), each its value times 2^-14, times the x they meet (xr[n]),
// added to acc
__device__ __forceinline__ float word_dot(unsigned w, const float* xr, float acc)
{
    float f[8];
    const unsigned s = opaque(w & 0x88888888u);                         // the 8 sign bits
    const unsigned odd = bitselect(w >> 3, s, 0x0E0E0E0Eu);              // bytes: codes 1, 3, 5, 7
    const unsigned even = bitselect(w << 1, s << 4, 0x0E0E0E0Eu);        // bytes: codes 0, 2, 4, 6
    const float2 a = f16x2_to_float2(__byte_perm(even, 0u, 0x1404));    // halves [code 0, 0], [code 2, 0]
    const float2 b = f16x2_to_float2(__byte_perm(odd, 0u, 0x1404));     // codes 1, 3
    const float2 c = f16x2_to_float2(__byte_perm(even, 0u, 0x3424));    // codes 4, 6
    const float2 d = f16x2_to_float2(__byte_perm(odd, 0u, 0x3424));     // codes 5, 7
    f[0] = a.x; f[2] = a.y; f[1] = b.x; f[3] = b.y; f[4] = c.x; f[6] = c.y; f[5] = d.x; f[7] = d.y;
#pragma unroll
    for (int n = 0; n < 8; ++n) acc = fmaf(f[n], xr[n], acc);
    return acc;
}

// one chunk (32 codes) times x, each 16-value block's sum times its scale (scale.x for values 0-15)
__device__ __forceinline__ float chunk_dot(const uint4 v, float2 scale, const float* xr)
{
    const float lo = word_dot(v.y, xr + 8, word_dot(v.x, xr, 0.0f));
    const float hi = word_dot(v.w, xr + 24, word_dot(v.z, xr + 16, 0.0f));
    return fmaf(hi, scale.y, lo * scale.x);
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

// the codes and scale pairs of GROUP rows from index at (a row's chunk c: row x chunks + c), rows past the last
// (index last) reading the last row instead
__device__ __forceinline__ void load_group(uint4 (&v)[GROUP], unsigned (&s)[GROUP], const uint4* w4,
                                           const unsigned short* s2, unsigned at, unsigned chunks, unsigned last)
{
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
        const unsigned i = min(at + g * chunks, last);
        v[g] = w4[i];
        s[g] = s2[i];
    }
}

// at most 96 registers a thread: five blocks of 128 threads an SM
extern "C" __global__ void __launch_bounds__(BLOCK_X, 5) nvfp4_stream(float* y, const unsigned char* w,
        const unsigned char* scales, const float* tensor_scale, const float* x, int M, int K)
{
    static_assert(TILE_Y % GROUP == 0, "rows come in groups of 8");
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
        const unsigned cc = live ? c : end - 1;   // a lane past the range reads its last chunk, times x = 0
        float xr[32];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 v = live ? reinterpret_cast<const float4*>(x)[8 * c + i] : make_float4(0.f, 0.f, 0.f, 0.f);
            xr[4 * i] = v.x; xr[4 * i + 1] = v.y; xr[4 * i + 2] = v.z; xr[4 * i + 3] = v.w;
        }
        const unsigned last = (unsigned)(M - 1) * chunks + cc;
        unsigned at = (unsigned)row0 * chunks + cc;
        uint4 v[GROUP];
        unsigned s[GROUP];
        load_group(v, s, w4, s2, at, chunks, last);
#pragma unroll 1
        for (int r0 = 0; r0 < TILE_Y; r0 += GROUP) {
            float d[GROUP];
#pragma unroll
            for (int g = 0; g < GROUP; g += 2) {
                unsigned f0, f1;   // rows g and g + 1: each its chunk's two block scales as an fp16 pair
                e4m3_to_f16x2(s[g] | s[g + 1] << 16, f0, f1);
                d[g] = chunk_dot(v[g], f16x2_to_float2(f0), xr);
                d[g + 1] = chunk_dot(v[g + 1], f16x2_to_float2(f1), xr);
            }
            if (r0 + GROUP < TILE_Y) {   // the next group's loads, in flight during this group's reduction
                at += GROUP * chunks;
                load_group(v, s, w4, s2, at, chunks, last);
            }
            const float sum = reduce8(d, lane);
            if ((lane & 3) == 0) partial[warp][r0 + (lane >> 2)] += sum;   // lane 4r holds row r's sum
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
            if (row0 + r < M) y[row0 + r] = t * (tensor_scale[0] * 0x1p14f);   // the decode's 2^-14 undone
        }
    }
    cluster_sync();   // block 0 has read them: the others may exit
}
