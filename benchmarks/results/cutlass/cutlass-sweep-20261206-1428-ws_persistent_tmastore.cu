// Candidate: the warp-specialised kernel made persistent (one block an SM, the spec's `persistent = true`), each
// block walking the tiles blockIdx.x, blockIdx.x + gridDim.x, ... in groups of GROUP_ROWS tile rows (down each
// column of a group before the next). The producer and the consumers count slabs across tiles, so the stages and
// barrier parities run on from one tile to the next: the producer fills the next tile's stages while the consumers
// store this one. The consumers also free the tile's last slab. The epilogue goes through shared memory and TMA
// stores, as the Hopper track's persistent step does: each consumer writes its 64 x 256 part box by box (64 x 32
// fp32, 8 KiB, 128-byte swizzled) into one of its two buffers and one thread stores it (spec: C's tensor map with
// a 32 x 64 box, dynamic_smem 230400).
#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

using namespace cute;
using Element = cutlass::half_t;
typedef unsigned short f16;            // the raw bits the grader passes
using Barrier = cutlass::arch::ClusterTransactionBarrier;
constexpr int BM = TILE_Y, BN = TILE_X, CONSUMERS = 2 * 128;
#define GROUP_ROWS 8
#define BOX_COLUMNS 32                                 // a TMA store's box of C: 32 fp32 (128 bytes) x 64 rows
#define BOX_FLOATS (BOX_COLUMNS * 64)

// Tile `tile` of a rows x cols grid of tiles, numbered down the columns of groups of GROUP_ROWS rows.
__device__ __forceinline__ void tile_at(int tile, int rows, int cols, int& row, int& col)
{
    const int first = tile / (GROUP_ROWS * cols) * GROUP_ROWS, height = min(GROUP_ROWS, rows - first);
    const int within = tile % (GROUP_ROWS * cols);
    row = first + within % height;
    col = within / height;
}

extern "C" __global__ void __launch_bounds__(BLOCK_X, 1)
cutlass_gemm_ws(float* C, const f16* A, const f16* B, int M, int N, int K,
                const __grid_constant__ TmaDescriptor mapA, const __grid_constant__ TmaDescriptor mapB,
                const __grid_constant__ TmaDescriptor mapC)
{
    // STAGES K-major tiles of A and of B, 128-byte swizzled; the first at a multiple of 1024 bytes (the pattern's).
    auto sA_layout = tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<BM>, Int<BK>, Int<STAGES>>{});
    auto sB_layout = tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<BN>, Int<BK>, Int<STAGES>>{});
    extern __shared__ unsigned char dynamic[];
    __shared__ uint64_t full[STAGES], empty[STAGES];
    Element* smem_A = reinterpret_cast<Element*>((reinterpret_cast<uintptr_t>(dynamic) + 1023) & ~uintptr_t(1023));
    Element* tiles_B = smem_A + cosize(sA_layout);
    Tensor sA = make_tensor(make_smem_ptr(smem_A), sA_layout);       // (BM, BK, STAGES)
    Tensor sB = make_tensor(make_smem_ptr(tiles_B), sB_layout);     // (BN, BK, STAGES)
    float* staging = reinterpret_cast<float*>(tiles_B + cosize(sB_layout));   // each consumer's two store buffers
    const int rows = M / BM, cols = N / BN, tiles = rows * cols, slabs = K / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            Barrier::init(&full[s], 1);
            Barrier::init(&empty[s], CONSUMERS);
        }
        cutlass::arch::fence_barrier_init();
    }
    __syncthreads();

    if (threadIdx.x < 128) {   // the producer warpgroup: one thread copies, STAGES slabs ahead of the consumers
        cutlass::arch::warpgroup_reg_dealloc<40>();
        if (threadIdx.x == 0) {
            constexpr uint32_t stage_bytes = (BM + BN) * BK * sizeof(Element);
            const uint64_t hint = static_cast<uint64_t>(TMA::CacheHintSm90::EVICT_NORMAL);
            int it = 0;   // slabs issued, across tiles
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                int row, col;
                tile_at(tile, rows, cols, row, col);
                for (int kt = 0; kt < slabs; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES)   // the consumers have freed the slab this stage held STAGES slabs ago
                        Barrier::wait(&empty[s], (it / STAGES - 1) % 2);
                    Barrier::arrive_and_expect_tx(&full[s], stage_bytes);
                    SM90_TMA_LOAD_2D::copy(&mapA, &full[s], hint, smem_A + s * BM * BK, kt * BK, row * BM);
                    SM90_TMA_LOAD_2D::copy(&mapB, &full[s], hint, tiles_B + s * BN * BK, kt * BK, col * BN);
                }
            }
        }
        return;
    }

    // The consumer warpgroups: wgmma 64 x BN x 16 from shared memory, one warpgroup per 64 rows of the tile.
    cutlass::arch::warpgroup_reg_alloc<232>();
    TiledMMA mma = make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<BN>, Int<BK>>>(),
                                  Layout<Shape<Int<BM / 64>, _1, _1>>{});
    ThrMMA thr = mma.get_slice(threadIdx.x - 128);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));   // descriptors: (MMA, MMA_M, MMA_K, STAGES)
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    const int consumer = (threadIdx.x - 128) / 128, t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const int r = 16 * warp + lane / 4;   // the accumulator rows this thread holds: r and r + 8 of its 64
    float* buffers = staging + consumer * 2 * BOX_FLOATS;
    Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});   // this thread's fp32 accumulators
    int it = 0;   // slabs consumed, across tiles
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int row, col;
        tile_at(tile, rows, cols, row, col);
        clear(acc);
        for (int kt = 0; kt < slabs; ++kt, ++it) {
            const int s = it % STAGES;
            Barrier::wait(&full[s], (it / STAGES) % 2);
            warpgroup_fence_operand(acc);
            warpgroup_arrive();
            gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);   // BK / 16 wgmmas
            warpgroup_commit_batch();
            warpgroup_wait<1>();                                   // the previous slab's wgmmas are done
            warpgroup_fence_operand(acc);
            if (kt > 0)
                Barrier::arrive(&empty[(it - 1) % STAGES]);
        }
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc);
        Barrier::arrive(&empty[(it - 1) % STAGES]);            // the tile's last slab: the producer may refill it
        // acc in wgmma's register order: values 4 g .. 4 g + 3 are rows r and r + 8 of the 8-column group g, columns
        // 8 g + 2 (lane % 4) and the next. A box row is 128 bytes; the swizzle puts 16-byte chunk j at j ^ (row % 8).
#pragma unroll
        for (int box = 0; box < BN / BOX_COLUMNS; ++box) {
            float* buffer = buffers + (box % 2) * BOX_FLOATS;
            if (t == 0)
                tma_store_wait<1>();   // the store issued from this buffer two boxes ago has read it
            cutlass::arch::NamedBarrier::sync(128, 1 + consumer);
#pragma unroll
            for (int i = 0; i < BOX_COLUMNS / 8; ++i) {
                const int g = box * BOX_COLUMNS / 8 + i, byte = 32 * i + 8 * (lane % 4);
                const int low = (((byte >> 4) ^ (r % 8)) << 4) | (byte & 15);   // rows r and r + 8: same swizzle
                *reinterpret_cast<float2*>(reinterpret_cast<char*>(buffer) + r * 128 + low) =
                    make_float2(acc(4 * g), acc(4 * g + 1));
                *reinterpret_cast<float2*>(reinterpret_cast<char*>(buffer) + (r + 8) * 128 + low) =
                    make_float2(acc(4 * g + 2), acc(4 * g + 3));
            }
            tma_store_fence();
            cutlass::arch::NamedBarrier::sync(128, 1 + consumer);
            if (t == 0) {
                SM90_TMA_STORE_2D::copy(&mapC, buffer, col * BN + box * BOX_COLUMNS, row * BM + 64 * consumer);
                tma_store_arrive();
            }
        }
    }
    if (t == 0)
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");   // every store complete before the block ends
}
