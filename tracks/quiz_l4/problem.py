"""Lecture 4's quiz, the GEMM worklog from kernel 1 to kernel 4: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 4: the GEMM worklog, naive to 1D block-tiling"
INTRO = """
From the GEMM worklog's kernels 1 to 4 (*Naive*, *Global memory coalescing*, *Shared-memory tiling*, *1D
block-tiling*): `C = A @ B` in fp32 (4 bytes), A is M x K, B is K x N, C is M x N, all row-major. A multiply-add
is 2 FLOPs. "Bytes read from global memory" counts every load a kernel issues, as if no cache kept anything
(1 GB = 10^9 bytes). A warp is 32 threads, `threadIdx.x` the fastest-varying index.
"""
SIZES = [1024, 2048, 4096, 8192]

NAIVE = """\
__global__ void sgemm_naive(int M, int N, int K, const float* A, const float* B, float* C) {
    int row = blockIdx.x * 32 + threadIdx.x;
    int col = blockIdx.y * 32 + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}"""

QUESTIONS = [
    Numeric("gemm_gflop", "The FLOPs of `C = A @ B` for the M, N and K the cell below gives you, in GFLOP "
            "(10^9 FLOP).",
            lambda r: {"m": r.choice(SIZES), "n": r.choice(SIZES), "k": r.choice(SIZES)},
            given="M = {m}, N = {n}, K = {k}", unit="GFLOP", rel_tol=0.01),
    Choice("naive_a_access", "In `sgemm_naive` below, consecutive threads of a warp have consecutive `threadIdx.x`, "
           "so consecutive `row`. At one step `k`, how does a warp read `A[row * K + k]`?\n\n```\n" + NAIVE + "\n```",
           {"a": "coalesced: the 32 threads read 32 consecutive floats",
            "b": "a broadcast: all 32 threads read the same float",
            "c": "strided: the threads' addresses are K floats apart, one 32-byte sector per thread",
            "d": "from shared memory, which the compiler fills"}),
    Numeric("naive_gb", "Kernel 1 (`sgemm_naive` of question 2): one thread per element of C, each reading its "
            "row of A and its column of B. The bytes it reads from global memory for your M, N and K, in GB.",
            lambda r: {"m": r.choice(SIZES), "n": r.choice(SIZES), "k": r.choice(SIZES)},
            given="M = {m}, N = {n}, K = {k}", unit="GB", rel_tol=0.01),
    Choice("coalescing_fix", "Kernel 2 (*Global memory coalescing*) changes only how a thread's index maps to C. "
           "What does the change achieve?",
           {"a": "consecutive threads of a warp take consecutive columns of C, so the warp's reads of B and writes "
                 "of C are to consecutive addresses, and its reads of A are to one address (a broadcast)",
            "b": "each thread computes several elements of C, so it reuses values in registers",
            "c": "the tiles of A and B are cached in shared memory",
            "d": "the matrices are read with 128-bit (float4) loads"}),
    Numeric("tiled_gb", "Kernel 3 (shared-memory tiling) on square N x N matrices: each block computes a T x T tile "
            "of C, and for every step along K loads a T x T tile of A and one of B from global memory into shared "
            "memory. The bytes it reads from global memory, in GB.",
            lambda r: {"n": r.choice(SIZES), "t": r.choice([16, 32, 64])},
            given="N = {n}, T = {t}", unit="GB", rel_tol=0.01),
    Numeric("tile_intensity", "A block computes a BM x BN tile of C. For each slab of BK along K it loads BM x BK "
            "values of A and BK x BN of B from global memory (fp32) and does the slab's BM x BN x BK multiply-adds. "
            "Its arithmetic intensity (FLOP per byte loaded from global memory).",
            lambda r: {"bm": r.choice([32, 64, 128, 256]), "bn": r.choice([32, 64, 128, 256]),
                       "bk": r.choice([8, 16, 32])},
            given="BM = {bm}, BN = {bn}, BK = {bk}", unit="FLOP/byte", rel_tol=0.01),
    Line("race", "A shared-memory tiled kernel (blocks of 32 x 32 threads, `tx = threadIdx.x`, `ty = threadIdx.y`, "
         "M, N, K multiples of 32). Which line reads shared memory that other threads of the block may not have "
         "written yet?",
         """\
float acc = 0.0f;
for (int bk = 0; bk < K; bk += 32) {
    As[ty][tx] = A[row * K + bk + tx];
    Bs[ty][tx] = B[(bk + ty) * N + col];
    for (int k = 0; k < 32; ++k)
        acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
}
C[row * N + col] = acc;"""),
    Numeric("blocktile_loads", "Kernel 4 (1D block-tiling): each thread computes TM results of C in one column. At "
            "each step `k` of the inner loop it reads one value of B from shared memory into a register, then for "
            "each of its TM results reads one value of A from shared memory and does one multiply-add. Shared-memory "
            "loads per multiply-add, for your TM (kernel 3 does 2).",
            lambda r: {"tm": r.choice([2, 4, 8, 16])},
            given="TM = {tm}", unit="loads per multiply-add", rel_tol=0.01),
]
