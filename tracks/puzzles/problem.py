"""The fourteen GPU Puzzles: statements, numpy references, launches and access limits.

Sizes in ``hidden_sizes`` include ones that are not a multiple of the block size wherever the puzzle's
geometry allows it; hidden inputs are drawn fresh on every grading run.
"""
from __future__ import annotations

import numpy as np

from graders.numba_engine.puzzle import Case, Limits, Puzzle, blocks_for

TPB_BLOCKS = 4      # threads per block in the Blocks puzzle
TPB_2D = 3          # threads per block side in Map 2D, Broadcast, Blocks 2D and Matmul
TPB_SHARED = 4      # threads per block in the Shared puzzle
TPB = 8             # threads per block in puzzles 9-13
MAX_CONV = 4        # longest filter in 1D Convolution


def _conv(a: np.ndarray, b: np.ndarray, a_size: int, b_size: int) -> np.ndarray:
    out = np.zeros(a_size)
    for i in range(a_size):
        for j in range(b_size):
            if i + j < a_size:
                out[i] += float(a[i + j]) * float(b[j])
    return out


def _pool(a: np.ndarray, size: int) -> np.ndarray:
    a = a.astype(np.float64)
    return np.array([a[max(i - 2, 0): i + 1].sum() for i in range(size)])


def _block_sums(a: np.ndarray, size: int) -> np.ndarray:
    a = a.astype(np.float64)
    return np.array([a[s: s + TPB].sum() for s in range(0, size, TPB)])


PUZZLES: list[Puzzle] = [
    Puzzle(
        1, "map", "Map",
        "Write a kernel that adds 10 to each position of `a` and stores it in `out`. "
        "There is exactly one thread per position.",
        "map_kernel",
        reference=lambda a, size: a + 10,
        case=lambda n: Case(((n,),), (n,), (1,), (n,), (n,)),
        public_sizes=(4,), hidden_sizes=(4, 7, 32),
        limits=Limits(reads=1, writes=1),
    ),
    Puzzle(
        2, "zip", "Zip",
        "Write a kernel that adds `a` and `b` position by position and stores the sum in `out`. "
        "There is exactly one thread per position.",
        "zip_kernel",
        reference=lambda a, b, size: a.astype(np.float64) + b,
        case=lambda n: Case(((n,), (n,)), (n,), (1,), (n,), (n,)),
        public_sizes=(4,), hidden_sizes=(4, 9, 32),
        limits=Limits(reads=2, writes=1),
    ),
    Puzzle(
        3, "guard", "Guards",
        "Add 10 to each position of `a` into `out`, but now there are more threads than positions "
        "(8 threads). Threads past the end must touch nothing.",
        "guard_kernel",
        reference=lambda a, size: a + 10,
        case=lambda n: Case(((n,),), (n,), (1,), (8,), (n,)),
        public_sizes=(4,), hidden_sizes=(4, 5, 1),
        limits=Limits(reads=1, writes=1),
    ),
    Puzzle(
        4, "map2d", "Map 2D",
        "Add 10 to each position of the square matrix `a` into `out`, with a 3×3 block of threads "
        "that may be larger than the matrix.",
        "map2d_kernel",
        reference=lambda a, size: a + 10,
        case=lambda n: Case(((n, n),), (n, n), (1, 1), (TPB_2D, TPB_2D), (n,)),
        public_sizes=(2,), hidden_sizes=(2, 3, 1),
        limits=Limits(reads=1, writes=1),
    ),
    Puzzle(
        5, "broadcast", "Broadcast",
        "`a` is a column (size×1) and `b` a row (1×size). Store `a[i, 0] + b[0, j]` in `out[i, j]`, "
        "with a 3×3 block of threads.",
        "broadcast_kernel",
        reference=lambda a, b, size: a.astype(np.float64) + b,
        case=lambda n: Case(((n, 1), (1, n)), (n, n), (1, 1), (TPB_2D, TPB_2D), (n,)),
        public_sizes=(2,), hidden_sizes=(2, 3),
        limits=Limits(reads=2, writes=1),
    ),
    Puzzle(
        6, "blocks", "Blocks",
        f"Add 10 to each position of `a` into `out`. Now a block has only {TPB_BLOCKS} threads, "
        "fewer than there are positions, so several blocks are launched: combine the block index "
        "with the thread index.",
        "blocks_kernel",
        reference=lambda a, size: a + 10,
        case=lambda n: Case(((n,),), (n,), (blocks_for(n, TPB_BLOCKS),), (TPB_BLOCKS,), (n,)),
        public_sizes=(9,), hidden_sizes=(9, 13, 4),
        limits=Limits(reads=1, writes=1),
    ),
    Puzzle(
        7, "blocks2d", "Blocks 2D",
        "Add 10 to each position of the square matrix `a` into `out`, with a grid of 3×3 blocks "
        "that together may cover more than the matrix.",
        "blocks2d_kernel",
        reference=lambda a, size: a + 10,
        case=lambda n: Case(((n, n),), (n, n), (blocks_for(n, TPB_2D),) * 2, (TPB_2D, TPB_2D), (n,)),
        public_sizes=(5,), hidden_sizes=(5, 7, 3),
        limits=Limits(reads=1, writes=1),
    ),
    Puzzle(
        8, "shared", "Shared",
        f"Add 10 to each position of `a` into `out`, going through shared memory: each thread of a "
        f"{TPB_SHARED}-thread block loads one value into a shared array, the block synchronises, and "
        "each thread writes its result from shared memory.",
        "shared_kernel",
        reference=lambda a, size: a + 10,
        case=lambda n: Case(((n,),), (n,), (blocks_for(n, TPB_SHARED),), (TPB_SHARED,), (n,)),
        public_sizes=(8,), hidden_sizes=(8, 10),
        limits=Limits(reads=1, writes=1, shared_memory=True),
    ),
    Puzzle(
        9, "pooling", "Pooling",
        "Store in `out[i]` the sum of `a[i]`, `a[i-1]` and `a[i-2]` (terms before the start count as "
        f"0). One block of {TPB} threads. Each thread may read only one value from global memory: "
        "share the rest through shared memory.",
        "pool_kernel",
        reference=_pool,
        case=lambda n: Case(((n,),), (n,), (1,), (TPB,), (n,)),
        public_sizes=(8,), hidden_sizes=(8, 5),
        limits=Limits(reads=1, writes=1, shared_memory=True),
    ),
    Puzzle(
        10, "dot", "Dot Product",
        f"Store the dot product of `a` and `b` in `out[0]`. One block of {TPB} threads; each thread "
        "reads at most its two inputs, and the block writes global memory once.",
        "dot_kernel",
        reference=lambda a, b, size: np.array([np.dot(a.astype(np.float64), b)]),
        case=lambda n: Case(((n,), (n,)), (1,), (1,), (TPB,), (n,)),
        public_sizes=(8,), hidden_sizes=(8, 6),
        limits=Limits(reads=2, writes=1, block_writes=1, shared_memory=True),
    ),
    Puzzle(
        11, "conv1d", "1D Convolution",
        "Store in `out[i]` the sum over `j` of `a[i + j] * b[j]` (terms past the end of `a` count as "
        f"0). `b` has at most {MAX_CONV} entries; blocks of {TPB} threads. Stage `a` (with the halo "
        "the block needs beyond its own positions) and `b` in shared memory: at most 3 global reads "
        "and 1 global write per thread.",
        "conv_kernel",
        reference=_conv,
        case=lambda na, nb: Case(((na,), (nb,)), (na,), (blocks_for(na, TPB),), (TPB,), (na, nb)),
        public_sizes=((6, 3),), hidden_sizes=((6, 3), (15, 4), (16, 2)),
        limits=Limits(reads=3, writes=1, shared_memory=True),
    ),
    Puzzle(
        12, "prefix_sum", "Prefix Sum",
        f"Sum `a` block by block: block `k` stores the sum of `a[{TPB}*k : {TPB}*(k+1)]` in `out[k]`. "
        "Use a parallel reduction in shared memory (about log2 steps, not a loop in one thread). "
        "Each thread reads global memory once; each block writes once.",
        "sum_kernel",
        reference=_block_sums,
        case=lambda n: Case(((n,),), (blocks_for(n, TPB),), (blocks_for(n, TPB),), (TPB,), (n,)),
        public_sizes=(8,), hidden_sizes=(8, 15, 20),
        limits=Limits(reads=1, writes=1, block_writes=1, shared_memory=True),
    ),
    Puzzle(
        13, "axis_sum", "Axis Sum",
        f"`a` has shape (batch, size). Store the sum of each row in `out[row, 0]`. Blocks of {TPB}×1 "
        "threads, one block row per batch row (`cuda.blockIdx.y`). One global read per thread, one "
        "global write per block.",
        "axis_sum_kernel",
        reference=lambda a, size: a.astype(np.float64).sum(axis=1, keepdims=True),
        case=lambda batch, n: Case(((batch, n),), (batch, 1), (1, batch), (TPB, 1), (n,)),
        public_sizes=((4, 6),), hidden_sizes=((4, 6), (3, 8), (2, 5)),
        limits=Limits(reads=1, writes=1, block_writes=1, shared_memory=True),
    ),
    Puzzle(
        14, "matmul", "Matrix Multiply",
        "Store the matrix product `a @ b` of two square matrices in `out`, with 3×3 blocks of threads. "
        "Walk over tiles: each thread loads one value of `a` and one of `b` per tile into shared "
        "memory, so it reads global memory at most twice per tile.",
        "matmul_kernel",
        reference=lambda a, b, size: a.astype(np.float64) @ b,
        case=lambda n: Case(((n, n), (n, n)), (n, n), (blocks_for(n, TPB_2D),) * 2,
                            (TPB_2D, TPB_2D), (n,)),
        public_sizes=(2, 8), hidden_sizes=(2, 8, 7),
        limits=Limits(reads=lambda c: 2 * blocks_for(c.out[0], TPB_2D), writes=1, shared_memory=True),
    ),
]
