// expect: fp8_gemm_score=0
// status: incorrect
// Fast accumulation: all of K summed in the fp8 tensor core's own accumulator (every wgmma adds into the running sum,
// scale-d 1, as cuBLASLt's use_fast_accum=True and CUTLASS's FP8FastAccum schedules do), no promotion into fp32.
// Hopper's fp8 wgmma keeps about 13 bits of mantissa as it adds, so the error grows with K: emulated with 13-bit
// truncation (tests/tracks/test_serving.py, which matches cuBLASLt's measured error), a relative Frobenius error
// of 3.3e-4 (K = 512) to 8.3e-4 (K = 1920) against the kind's 2e-4 at the check shapes.

typedef unsigned char fp8;     // the raw bits of an e4m3 value
#define BM TILE_Y              // rows of C (and of A) a block's tile has: 64 for each consumer
#define BN TILE_X              // columns of C (rows of B's K-major storage): the 128 of one wgmma
#define TILE_BYTES_A (BM * BK)
#define TILE_BYTES_B (BN * BK)
#define STAGE_BYTES (TILE_BYTES_A + TILE_BYTES_B)
#define CONSUMERS 2
#define PRODUCER_REGISTERS 40
#define CONSUMER_REGISTERS 232
#define GROUP_ROWS 8           // tile rows numbered together

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// A wgmma shared-memory descriptor of a K-major tile whose rows are 128 bytes (BK = 128 e4m3), stored with the
// 128-byte swizzle: bits 0-13 the start address / 16, 16-29 the leading byte offset / 16 (unused by swizzled
// K-major layouts: 1), 32-45 the stride byte offset / 16 (1024: from one group of 8 rows to the next), 62-63 the
// swizzle mode (1: 128 bytes). Every tile, and every 64-row half of one, starts at a multiple of 1024 bytes, so the
// base offset (bits 49-51) is 0.
__device__ __forceinline__ unsigned long long descriptor(unsigned address)
{
    return ((unsigned long long)((address & 0x3FFFF) >> 4)) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

// D (64 x 128, fp32, in registers) = A (64 x 32, from its descriptor) * B (32 x 128, from its descriptor), plus D
// where `accumulate` is nonzero; both e4m3 and K-major (fp8 wgmma has no transpose); issued by all 128 threads of
// the warpgroup, asynchronously.
__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], unsigned long long a, unsigned long long b,
                                                 int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N_>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N_) : "memory");
}

// The accumulators' values pinned after wgmma_wait: the compiler may not read them before it.
__device__ __forceinline__ void fence_accumulators(float (&d)[64])
{
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// One BK = 128 deep slab of a consumer's 64 x 128 part added into d: four k32 wgmmas accumulating in the tensor
// core, each descriptor advanced by 32 e4m3 = 32 bytes along the swizzled rows.
__device__ __forceinline__ void multiply_slab(float (&d)[64], unsigned a_rows, unsigned b_tile)
{
#pragma unroll
    for (int k = 0; k < BK / 32; ++k)
        wgmma_m64n128k32(d, descriptor(a_rows + k * 32), descriptor(b_tile + k * 32), 1);
}

// A consumer's 64 x 128 sum times `scale` to C: warp w of the warpgroup (thread t of it) holds rows 16 w to 16 w +
// 15; in each 8-column group i a lane holds rows lane / 4 and lane / 4 + 8, columns 8 i + 2 (lane % 4) and the next.
__device__ __forceinline__ void store_tile(float* C, const float (&sum)[64], float scale, int t, int m0, int n0,
                                           int N)
{
    const int warp = t / 32, lane = t % 32;
    const int row = m0 + 16 * warp + lane / 4;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        const int col = n0 + 8 * i + 2 * (lane % 4);
        *reinterpret_cast<float2*>(&C[(size_t)row * N + col]) = make_float2(scale * sum[4 * i],
                                                                            scale * sum[4 * i + 1]);
        *reinterpret_cast<float2*>(&C[(size_t)(row + 8) * N + col]) = make_float2(scale * sum[4 * i + 2],
                                                                                  scale * sum[4 * i + 3]);
    }
}

struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };   // the driver's tensor map, 128 bytes

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

// The barrier's initialisation made visible to the TMA unit (the async proxy) before any copy completes on it.
__device__ __forceinline__ void mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also tells the barrier how many bytes the copies completing on it will bring.
__device__ __forceinline__ void mbarrier_expect_bytes(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

// Wait until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

// The TMA copy of the box at (inner, outer) of a 2-D tensor map into shared memory at dst, completing on bar.
__device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap& map, int inner, int outer, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(inner), "r"(outer), "r"(bar)
                 : "memory");
}

// The executing warpgroup's registers a thread set to N_ (a multiple of 8 from 24 to 256): .dec hands the rest
// back to the block's pool, .inc waits until the pool holds what it asks.
template <int N_>
__device__ __forceinline__ void release_registers() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N_)); }
template <int N_>
__device__ __forceinline__ void claim_registers() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N_)); }

// The first row and column of C of tile `tile` of a rows x cols grid of tiles, numbered down the columns of groups
// of GROUP_ROWS tile rows, so that the blocks at work at once share A's rows and B's columns in L2.
__device__ __forceinline__ void tile_origin(int tile, int rows, int cols, int& m0, int& n0)
{
    const int first = tile / (GROUP_ROWS * cols) * GROUP_ROWS, height = min(GROUP_ROWS, rows - first);
    const int within = tile % (GROUP_ROWS * cols);
    m0 = (first + within % height) * BM;
    n0 = within / height * BN;
}

extern "C" __global__ void __launch_bounds__(384, 1) fp8_gemm(float* C, const fp8* A, const fp8* B,
                                                              const float* scale_a, const float* scale_b,
                                                              int M, int N, int K,
                                                              const __grid_constant__ CUtensorMap mapA,
                                                              const __grid_constant__ CUtensorMap mapB)
{
    extern __shared__ unsigned char dynamic[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned tiles = (smem(dynamic) + 1023) & ~1023u;   // the 128-byte swizzle's pattern repeats every 1024
    const int slabs = K / BK, rows = M / BM, cols = N / BN;
    const int warpgroup = threadIdx.x / 128, t = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(smem(&full[s]), 1);            // the producer's arrive.expect_tx, then the copies' bytes
            mbarrier_init(smem(&empty[s]), CONSUMERS);   // each consumer warpgroup's release
        }
        mbarrier_init_fence();
    }
    __syncthreads();
    if (warpgroup == 0) {
        release_registers<PRODUCER_REGISTERS>();
        if (t == 0) {
            int it = 0;   // slabs copied so far, over all of this block's tiles
            for (int tile = blockIdx.x; tile < rows * cols; tile += gridDim.x) {
                int m0, n0;
                tile_origin(tile, rows, cols, m0, n0);
                for (int kt = 0; kt < slabs; ++kt, ++it) {
                    const int s = it % STAGES;
                    const unsigned stage = tiles + s * STAGE_BYTES;
                    if (it >= STAGES)   // use it / STAGES of the stage: both consumers released use it / STAGES - 1
                        mbarrier_wait(smem(&empty[s]), (it / STAGES - 1) % 2);
                    mbarrier_expect_bytes(smem(&full[s]), STAGE_BYTES);
                    tma_load(stage, mapA, kt * BK, m0, smem(&full[s]));
                    tma_load(stage + TILE_BYTES_A, mapB, kt * BK, n0, smem(&full[s]));
                }
            }
        }
    } else {
        claim_registers<CONSUMER_REGISTERS>();
        const int part = 64 * (warpgroup - 1);        // this consumer's rows of the block's tile
        const float scale = *scale_a * *scale_b;      // per-tensor: read once, one multiply an output
        float sum[64];
        int it = 0;   // slabs multiplied so far, over all of this block's tiles
        for (int tile = blockIdx.x; tile < rows * cols; tile += gridDim.x) {
            int m0, n0;
            tile_origin(tile, rows, cols, m0, n0);
#pragma unroll
            for (int i = 0; i < 64; ++i) sum[i] = 0.0f;
            for (int kt = 0; kt < slabs; ++kt, ++it) {
                const int s = it % STAGES;
                const unsigned stage = tiles + s * STAGE_BYTES;
                mbarrier_wait(smem(&full[s]), (it / STAGES) % 2);
                wgmma_fence();
                multiply_slab(sum, stage + part * 128, stage + TILE_BYTES_A);   // the tensor core's accumulator
                wgmma_commit();
                wgmma_wait<0>();   // the slab's wgmmas are done: the stage may be refilled
                fence_accumulators(sum);
                if (t == 0)
                    mbarrier_arrive(smem(&empty[s]));
            }
            store_tile(C, sum, scale, t, m0 + part, n0, N);
        }
    }
}
