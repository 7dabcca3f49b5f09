"""Lecture 5's quiz, the GEMM worklog from kernel 5 to warptiling: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 5: the GEMM worklog, 2D block-tiling to warptiling"
INTRO = """
From the GEMM worklog's kernels 5 to 8 (*2D block-tiling*, *Vectorized memory access*, autotuning, *Warptiling*)
and the hardware they run on. An H100 or H200 SM (Hopper) holds at most 2,048 threads (64 warps) and 32 blocks at
once, has 65,536 32-bit registers and 228 KiB of shared memory, of which every resident block also takes 1 KiB
that the system reserves. Shared memory has 32 banks, each 4 bytes wide: the 4-byte word at index *w* of a
128-byte-aligned array is in bank *w* mod 32. fp32 values are 4 bytes; a `float4` is 16. Occupancy is resident
warps / 64.
"""

# (threads per block, registers per thread): registers a multiple of 8, so that a warp's 32 x R registers are a
# whole number of the hardware's 256-register allocation units and the count below is exact
# (and a block's registers fit in the SM's: the launch succeeds)
LAUNCHES = [(t, r) for t in (128, 256, 512) for r in (32, 40, 48, 64, 72, 96, 128, 168, 232) if t * r <= 65536]
# (BM, BK, threads): a tile of A that every thread loads at least one float4 of
FLOAT4_TILES = [(bm, bk, t) for bm in (64, 128, 256) for bk in (8, 16, 32) for t in (64, 128, 256)
                if bm * bk >= 4 * t]

QUESTIONS = [
    Numeric("regtile_reuse", "Kernel 5: each thread computes a TM x TN tile of C. At each step `k` it reads TM values "
            "of A and TN values of B from shared memory into registers, then does the TM x TN multiply-adds of their "
            "outer product. Multiply-adds per shared-memory load, for your TM and TN.",
            lambda r: {"tm": r.choice([4, 8, 16]), "tn": r.choice([4, 8, 16])},
            given="TM = {tm}, TN = {tn}", unit="multiply-adds per load", rel_tol=0.01),
    Numeric("occupancy", "A kernel is launched with the threads per block and registers per thread the cell below "
            "gives you, using no shared memory. Its occupancy on Hopper, as a percentage (50 for half).",
            lambda r: dict(zip(("t", "regs"), r.choice(LAUNCHES))),
            given="{t} threads per block, {regs} registers per thread", unit="%", abs_tol=0.5),
    Numeric("smem_blocks", "A block uses S KiB of shared memory (registers and threads are not the limit). How many "
            "such blocks can be resident on one Hopper SM at once?",
            lambda r: {"s": r.choice([12, 16, 24, 32, 40, 48, 64, 96, 112])},
            given="S = {s} KiB", unit="blocks", abs_tol=0),
    Numeric("bank_conflict", "Kernel 5 with blocks of 16 x 16 threads: thread `t` computes the results of columns "
            "`(t % 16) * S` to `(t % 16) * S + S - 1` of a tile BN = 16 x S wide. At step `k`, the warp's thread `t` "
            "reads `Bs[k * BN + (t % 16) * S]` (a float, `Bs` 128-byte aligned). How many ways is this read "
            "bank-conflicted (1: no conflict; *w*: the most different words a warp reads from one bank; threads that "
            "read the same word do not conflict)?",
            lambda r: {"s": r.choice([1, 2, 4, 8, 12, 16])},
            given="S = {s}", unit="", abs_tol=0),
    Numeric("float4_loads", "Kernel 6 loads a BM x BK tile of A from global memory with `float4` loads, the block's "
            "threads sharing the work evenly. How many `float4` loads does each thread issue per tile?",
            lambda r: dict(zip(("bm", "bk", "t"), r.choice(FLOAT4_TILES))),
            given="BM = {bm}, BK = {bk}, {t} threads per block", unit="loads", abs_tol=0),
    Choice("transposed_a", "Kernel 6 stores the tile of A *transposed* in shared memory (`As[k][m]` instead of "
           "`As[m][k]`). Why?",
           {"a": "to make the global-memory loads of A coalesced",
            "b": "so that the TM values of A a thread needs at one step k are contiguous, read with one 128-bit "
                 "shared-memory load (LDS.128) instead of TM separate ones",
            "c": "because tensor cores need A in column-major order",
            "d": "to halve the shared memory the tile takes"}),
    Line("float4_alignment", "Kernel 6 loads its tiles with `float4`s, which must be 16-byte aligned. Which line's "
         "128-bit load from global memory needs **K** to be a multiple of 4?",
         """\
const int innerRowA = threadIdx.x / (BK / 4), innerColA = threadIdx.x % (BK / 4);
const int innerRowB = threadIdx.x / (BN / 4), innerColB = threadIdx.x % (BN / 4);
float4 tmp = reinterpret_cast<const float4*>(&A[innerRowA * K + innerColA * 4])[0];
As[(innerColA * 4 + 0) * BM + innerRowA] = tmp.x;
As[(innerColA * 4 + 1) * BM + innerRowA] = tmp.y;
As[(innerColA * 4 + 2) * BM + innerRowA] = tmp.z;
As[(innerColA * 4 + 3) * BM + innerRowA] = tmp.w;
reinterpret_cast<float4*>(&Bs[innerRowB * BN + innerColB * 4])[0] =
    reinterpret_cast<const float4*>(&B[innerRowB * N + innerColB * 4])[0];"""),
    Choice("warptiling", "What does kernel 8 (*Warptiling*) add to the block-tiled kernels before it?",
           {"a": "tensor cores: each warp issues `mma.sync` instructions",
            "b": "a tiling level for the warp: each warp computes its own WM x WN sub-tile of the block's tile, so "
                 "the loops match the unit the SM schedules and the shared-memory reads a warp issues together, and "
                 "the values its threads reuse, are grouped",
            "c": "more threads per block, so that occupancy rises to 100%",
            "d": "a search over BM, BN, BK, TM and TN"}),
    Choice("biggest_step", "Which step of the worklog's ladder is its biggest single jump in speed?",
           {"a": "kernel 2, global memory coalescing", "b": "kernel 3, shared-memory tiling",
            "c": "kernel 5, 2D block-tiling", "d": "kernel 8, warptiling"}),
]
