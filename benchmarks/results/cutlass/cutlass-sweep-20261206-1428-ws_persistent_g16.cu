// Candidate: the warp-specialised kernel made persistent (one block an SM, the spec's `persistent = true`), each
// block walking the tiles blockIdx.x, blockIdx.x + gridDim.x, ... in groups of GROUP_ROWS tile rows (down each
// column of a group before the next). The producer and the consumers count slabs across tiles, so the stages and
// barrier parities run on from one tile to the next: the producer fills the next tile's stages while the consumers
// store this one. The consumers also free the tile's last slab.
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
#define GROUP_ROWS 16

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
                const __grid_constant__ TmaDescriptor mapA, const __grid_constant__ TmaDescriptor mapB)
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
    Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
    Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});   // this thread's fp32 accumulators
    int it = 0;   // slabs consumed, across tiles
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int row, col;
        tile_at(tile, rows, cols, row, col);
        Tensor tCgC = thr.partition_C(local_tile(mC, Shape<Int<BM>, Int<BN>>{}, make_coord(row, col)));
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
        copy(AutoVectorizingCopyWithAssumedAlignment<64>{}, acc, tCgC);   // pairs of columns: 8-byte stores
    }
}
