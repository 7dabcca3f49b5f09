// CUTLASS's warp-specialised schedule: one warpgroup only copies and two only multiply, as CUTLASS's
// KernelTmaWarpSpecializedCooperative splits the block. The producer warpgroup gives up registers
// (cutlass::arch::warpgroup_reg_dealloc, setmaxnreg) and one of its threads keeps the STAGES slabs in flight,
// waiting on a slab's empty barrier before it refills it; the consumer warpgroups take the registers
// (warpgroup_reg_alloc), wait on each slab's full barrier, issue its wgmmas and free the previous slab. Hypothesis:
// in the first steps thread 0 is also a consumer and waits for the slowest warpgroup before each copy, so the copies
// trail the multiplies; with a producer of its own the copies run STAGES slabs ahead and the tensor cores wait only
// for the memory's bandwidth.
// The launch: 384 threads (a producer and two consumer warpgroups) on a 128 x 256 tile of C, BK = 64, STAGES = 4.
// Assumes M a multiple of 128, N of 256, K of 64.
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

extern "C" __global__ void __launch_bounds__(BLOCK_X, 1)
cutlass_gemm_ws(float* C, const f16* A, const f16* B, int M, int N, int K,
                const __grid_constant__ TmaDescriptor mapA, const __grid_constant__ TmaDescriptor mapB)
{
    // STAGES K-major tiles of A and of B, 128-byte swizzled; the first at a multiple of 1024 bytes (the pattern's).
    auto sA_layout = tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<BM>, Int<BK>, Int<STAGES>>{});
    auto sB_layout = tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<BN>, Int<BK>, Int<STAGES>>{});
    extern __shared__ unsigned char dynamic[];
    __shared__ uint64_t full[STAGES], empty[STAGES];
    Element* tiles = reinterpret_cast<Element*>((reinterpret_cast<uintptr_t>(dynamic) + 1023) & ~uintptr_t(1023));
    Element* tiles_B = tiles + cosize(sA_layout);
    Tensor sA = make_tensor(make_smem_ptr(tiles), sA_layout);       // (BM, BK, STAGES)
    Tensor sB = make_tensor(make_smem_ptr(tiles_B), sB_layout);     // (BN, BK, STAGES)
    // blocks numbered in groups of 8 tile rows, down each column of a group before the next column
    const int block = blockIdx.y * gridDim.x + blockIdx.x, first = block / (8 * gridDim.x) * 8;
    const int height = min(8, (int)gridDim.y - first), within = block % (8 * gridDim.x);
    const int tile_row = first + within % height, tile_col = within / height;
    const int m0 = tile_row * BM, n0 = tile_col * BN, slabs = K / BK;
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
            for (int kt = 0; kt < slabs; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES)   // the consumers have freed the slab this stage held STAGES slabs ago
                    Barrier::wait(&empty[s], (kt / STAGES - 1) % 2);
                Barrier::arrive_and_expect_tx(&full[s], stage_bytes);
                SM90_TMA_LOAD_2D::copy(&mapA, &full[s], hint, tiles + s * BM * BK, kt * BK, m0);
                SM90_TMA_LOAD_2D::copy(&mapB, &full[s], hint, tiles_B + s * BN * BK, kt * BK, n0);
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
    Tensor tCgC = thr.partition_C(local_tile(mC, Shape<Int<BM>, Int<BN>>{}, make_coord(tile_row, tile_col)));
    Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});   // this thread's fp32 accumulators
    clear(acc);
    for (int kt = 0; kt < slabs; ++kt) {
        const int s = kt % STAGES;
        Barrier::wait(&full[s], (kt / STAGES) % 2);
        warpgroup_fence_operand(acc);
        warpgroup_arrive();
        gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);   // BK / 16 wgmmas
        warpgroup_commit_batch();
        warpgroup_wait<1>();                                   // the previous slab's wgmmas are done
        warpgroup_fence_operand(acc);
        if (kt > 0)
            Barrier::arrive(&empty[(kt - 1) % STAGES]);
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    copy(AutoVectorizingCopyWithAssumedAlignment<64>{}, acc, tCgC);   // pairs of columns: 8-byte stores
}
