"""Lecture 3's quiz, the memory hierarchy: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 3: the memory hierarchy"
INTRO = """
Shared memory has 32 banks, each 4 bytes wide: the 4-byte word at byte offset *a* is in bank (*a* / 4) mod 32. A
warp's global load is served in 32-byte sectors. Arrays are row-major and start at an address aligned to 128
bytes; `float` is 4 bytes; 1 MiB = 2^20 bytes.
"""

QUESTIONS = [
    Numeric("bank", "`__shared__ float tile[32][W];` The bank of `tile[r][c]`, for the W, r and c of the cell "
            "below.",
            lambda r: {"w": r.choice([16, 32, 33, 40, 64]), "r": r.randrange(32), "c": r.randrange(16)},
            given="W = {w}, r = {r}, c = {c}", unit="", abs_tol=0),
    Numeric("conflict", "`__shared__ float tile[32][W];` A warp reads a column, thread *t* reading `tile[t][0]`. "
            "How many ways is the access bank-conflicted (1: no conflict; k: the most threads that hit one bank "
            "with different words)?",
            lambda r: {"w": r.choice([32, 33, 36, 40, 48, 64, 16])},
            given="W = {w}", unit="", abs_tol=0),
    Numeric("sectors", "A warp's thread *t* loads `in[t * S]` (fp32). How many 32-byte sectors does the warp's "
            "load touch?",
            lambda r: {"s": r.choice([1, 2, 4, 8, 16, 32])},
            given="S = {s}", unit="sectors", abs_tol=0),
    Numeric("transpose_bytes", "An out-of-place transpose of an *M* x *N* fp32 matrix that reads each element once "
            "and writes each once. The bytes it moves, in MiB.",
            lambda r: {"m": r.choice([1024, 2048, 4096, 8192]), "n": r.choice([1024, 4096, 16384])},
            given="M = {m}, N = {n}", unit="MiB", rel_tol=0.01),
    Choice("coalescing", "In the naive transpose `out[col * n + row] = in[row * n + col]`, consecutive threads of a "
           "warp have consecutive `col`. Which accesses are coalesced?",
           {"a": "both", "b": "the read only", "c": "the write only", "d": "neither"}),
    Choice("hierarchy", "From fastest to slowest, for a load a thread issues:",
           {"a": "registers, shared memory, L2, HBM", "b": "shared memory, registers, HBM, L2",
            "c": "L2, registers, shared memory, HBM", "d": "registers, L2, shared memory, HBM"}),
    Line("race", "A tiled transpose, blocks of 32 x 32 threads, n a multiple of 32. Which line races?",
         """\
__global__ void transpose(float* out, const float* in, int n) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}"""),
]
