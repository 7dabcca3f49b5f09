"""Lecture 2's quiz, the CUDA programming model: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 2: the CUDA programming model"
INTRO = """
Threads, blocks and grids; warps; what a kernel's index arithmetic covers and what `__syncthreads()` guarantees.
A warp is 32 threads; a block's threads are numbered x first (`threadIdx.x` fastest), then y.
"""

QUESTIONS = [
    Numeric("global_index", "A 1-D launch: the global index `blockIdx.x * blockDim.x + threadIdx.x` of the thread "
            "the cell below names.",
            lambda r: (lambda d: {"block": r.randrange(1, 5000), "dim": d, "t": r.randrange(d)})(
                r.choice([64, 128, 256, 512, 1024])),
            given="blockIdx.x = {block}, blockDim.x = {dim}, threadIdx.x = {t}", unit="", abs_tol=0),
    Numeric("blocks", "A kernel handles one element per thread, in blocks of *T* threads. The fewest blocks that "
            "cover *N* elements.",
            lambda r: {"n": r.randrange(10_000, 50_000_000), "t": r.choice([128, 256, 512, 1024])},
            given="N = {n:,}, T = {t}", unit="blocks", abs_tol=0),
    Numeric("warps", "The warps a block of the shape the cell below gives is run as.",
            lambda r: dict(zip(("x", "y"), r.choice([(16, 16), (32, 8), (24, 10), (100, 1), (48, 3), (7, 7),
                                                     (33, 4), (128, 2)]))),
            given="blockDim = ({x}, {y})", unit="warps", abs_tol=0),
    Choice("divergence", "In `if (threadIdx.x % 2 == 0) f(); else g();`, what does one warp do?",
           {"a": "its even threads run f() on one SM while its odd threads run g() on another",
            "b": "it runs f() with the odd threads masked off, then g() with the even threads masked off",
            "c": "the compiler splits it into two warps of 16 threads",
            "d": "it runs only the branch its first thread takes"}),
    Choice("syncthreads", "`__syncthreads()` waits until",
           {"a": "every thread of the grid has reached it",
            "b": "every thread of the calling block has reached it, and their shared-memory writes before it are "
                 "visible to the block",
            "c": "every thread of the calling warp has reached it",
            "d": "the host has copied the kernel's inputs"}),
    Line("out_of_bounds", "Launched on ceil(n / 256) blocks of 256 threads with n = 1000. Which line is the first "
         "to touch memory out of bounds?",
         """\
__global__ void scale(float* out, const float* in, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    out[i] = s * v;
}"""),
    Line("race", "One block of 256 threads sums 256 values. Which line races (reads shared memory another "
         "thread may not have written yet)?",
         """\
__global__ void block_sum(float* out, const float* in) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}"""),
]
