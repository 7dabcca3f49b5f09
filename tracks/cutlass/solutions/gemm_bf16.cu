// CUTLASS, the Hopper GEMM in CuTe: the W2 pipeline's TMA copies, mbarriers and wgmma again, each a CuTe or
// CUTLASS name instead of inline PTX. The shared tiles are CuTe layouts (GMMA's 128-byte swizzle atom, 8 rows of
// 64 elements, tiled to BM x BK and BN x BK: the pattern the tensor maps write); a TiledMMA of two warpgroups
// partitions them into wgmma descriptors and the C tile into each thread's accumulators; thread 0 keeps STAGES
// slabs in flight with TMA copies that complete on full barriers, and every thread frees a slab on its empty
// barrier once its wgmmas have read it. Hypothesis: the templates derive the descriptors, the swizzle and the
// accumulators' layout that W2 wrote by hand, so a 128 x 256 tile on two warpgroups (four times W2's 64 x 128, each
// wgmma 64 x 256 x 16) is a change of two numbers, and the fp16 GEMM a change of one type.
// The launch: 128 x 2 threads (two warpgroups) on a 128 x 256 tile of C, BK = 64, STAGES = 4. Assumes M a
// multiple of 128, N of 256, K of 64.
#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>

using namespace cute;
using Element = cutlass::bfloat16_t;   // the element type; the fp16 GEMM changes this line only (cutlass::half_t)
typedef unsigned short bf16;           // the raw bits the grader passes
using Barrier = cutlass::arch::ClusterTransactionBarrier;
constexpr int BM = TILE_Y, BN = TILE_X;

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y, 1)
cutlass_gemm_bf16(float* C, const bf16* A, const bf16* B, int M, int N, int K,
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

    // wgmma 64 x BN x 16 from shared memory (the selector picks the instruction for the types and tile), a
    // warpgroup per 64 rows of the tile.
    TiledMMA mma = make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<BN>, Int<BK>>>(),
                                  Layout<Shape<Int<BM / 64>, _1, _1>>{});
    const int thread = threadIdx.y * BLOCK_X + threadIdx.x;   // warpgroup threadIdx.y
    ThrMMA thr = mma.get_slice(thread);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));   // descriptors: (MMA, MMA_M, MMA_K, STAGES)
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
    Tensor tCgC = thr.partition_C(local_tile(mC, Shape<Int<BM>, Int<BN>>{}, make_coord(blockIdx.y, blockIdx.x)));
    Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});   // this thread's fp32 accumulators
    clear(acc);

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, slabs = K / BK;
    constexpr uint32_t stage_bytes = (BM + BN) * BK * sizeof(Element);
    auto load = [&](int slab, int s) {   // thread 0: one slab of A and of B into stage s, completing on full[s]
        const uint64_t hint = static_cast<uint64_t>(TMA::CacheHintSm90::EVICT_NORMAL);
        Barrier::arrive_and_expect_tx(&full[s], stage_bytes);
        SM90_TMA_LOAD_2D::copy(&mapA, &full[s], hint, tiles + s * BM * BK, slab * BK, m0);
        SM90_TMA_LOAD_2D::copy(&mapB, &full[s], hint, tiles_B + s * BN * BK, slab * BK, n0);
    };
    if (thread == 0) {
        for (int s = 0; s < STAGES; ++s) {
            Barrier::init(&full[s], 1);
            Barrier::init(&empty[s], BLOCK_X * BLOCK_Y);
        }
        cutlass::arch::fence_barrier_init();
    }
    __syncthreads();
    if (thread == 0)
        for (int s = 0; s < STAGES && s < slabs; ++s)
            load(s, s);

    for (int kt = 0; kt < slabs; ++kt) {
        const int s = kt % STAGES;
        Barrier::wait(&full[s], (kt / STAGES) % 2);
        warpgroup_fence_operand(acc);
        warpgroup_arrive();
        gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);   // BK / 16 wgmmas
        warpgroup_commit_batch();
        warpgroup_wait<1>();                                   // the previous slab's wgmmas are done
        warpgroup_fence_operand(acc);
        if (kt > 0) {
            const int p = (kt - 1) % STAGES, next = kt - 1 + STAGES;
            Barrier::arrive(&empty[p]);
            if (thread == 0 && next < slabs) {
                Barrier::wait(&empty[p], ((kt - 1) / STAGES) % 2);
                load(next, p);
            }
        }
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    copy(AutoVectorizingCopyWithAssumedAlignment<64>{}, acc, tCgC);   // pairs of columns: 8-byte stores
}
