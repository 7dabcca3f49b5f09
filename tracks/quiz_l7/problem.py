"""Lecture 7's quiz, profiling and debugging kernels: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 7: profiling and debugging kernels"
INTRO = """
From the chapters on debugging (*Debugging kernels: the vLLM workflow*: compute-sanitizer, `CUDA_LAUNCH_BLOCKING`,
CUDA core dumps) and on profiling with Nsight Compute (`ncu`: its speed-of-light, occupancy and warp-state
sections). 1 MB = 10^6 bytes, 1 GB = 10^9 bytes, 1 TB/s = 10^12 bytes per second; a fused multiply-add (FFMA)
counts 2 FLOPs, an FADD or an FMUL one.
"""
UTILISATION = [0.25, 0.4, 0.55, 0.7, 0.85, 0.92]


def _dram(r) -> dict:
    """A kernel's DRAM bytes read and written (MB) and its duration (µs, to 0.1) on a GPU of peak bandwidth p."""
    read, written, peak = r.choice([64, 128, 256, 512, 1024]), r.choice([0, 64, 256, 512]), r.choice([3.35, 4.8])
    seconds = (read + written) * 1e6 / (peak * 1e12 * r.choice(UTILISATION))
    return {"r": read, "w": written, "p": peak, "t": round(seconds * 1e6, 1)}


QUESTIONS = [
    Choice("racecheck", "Threads of a block write shared memory and other threads of the block read those words "
           "with no barrier between. Which compute-sanitizer tool reports this hazard?",
           {"a": "memcheck", "b": "racecheck", "c": "initcheck", "d": "synccheck"}),
    Choice("initcheck", "A kernel reads a buffer that `cudaMalloc` returned and nothing ever wrote. Which "
           "compute-sanitizer tool reports the read?",
           {"a": "memcheck", "b": "racecheck", "c": "initcheck", "d": "synccheck"}),
    Line("skipped_barrier", "Launched with 256 threads per block on ceil(n / 256) blocks, with n not a multiple of "
         "256. Which line lets some threads of the last block skip the `__syncthreads()` barriers the others wait "
         "at?",
         """\
__global__ void block_max(float* out, const float* in, int n) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * 256 + t;
    if (i >= n) return;
    s[t] = in[i];
    __syncthreads();
    for (int stride = 128; stride > 0; stride /= 2) {
        if (t < stride) s[t] = fmaxf(s[t], s[t + stride]);
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}"""),
    Choice("launch_blocking", "PyTorch says *CUDA kernel errors might be asynchronously reported at some other API "
           "call ... consider passing CUDA_LAUNCH_BLOCKING=1*. In which case does `CUDA_LAUNCH_BLOCKING=1` still not "
           "show which kernel made the illegal memory access?",
           {"a": "the kernel runs inside a CUDA graph: the error shows only at the graph's launch, not at the kernel",
            "b": "the kernel was compiled with `-O3`",
            "c": "the kernel reads memory out of bounds instead of writing it",
            "d": "the program runs on a single GPU"}),
    Choice("core_dump", "Which environment variable makes the CUDA driver write a core dump of the GPU's state at the "
           "moment a kernel makes an illegal memory access, naming the kernel and the faulting instruction?",
           {"a": "`CUDA_LAUNCH_BLOCKING=1`", "b": "`TORCH_USE_CUDA_DSA=1`",
            "c": "`CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1`", "d": "`CUDA_VISIBLE_DEVICES=0`"}),
    Choice("missing_person", "The debugging chapter sorts failing kernels into a *dead body* and a *missing person*. "
           "Which is a missing person?",
           {"a": "a kernel that crashes with an illegal memory access",
            "b": "a kernel that finishes with a wrong answer",
            "c": "a kernel that never finishes: the program hangs",
            "d": "a kernel that is slower than expected"}),
    Numeric("dram_percent", "`ncu` reports the DRAM bytes a kernel read and wrote and its duration (the cell below "
            "gives them, and the GPU's peak bandwidth). Its DRAM throughput as a percentage of the peak.",
            _dram, given="{r} MB read, {w} MB written in {t} µs; peak {p:g} TB/s", unit="%", rel_tol=0.02),
    Numeric("achieved_intensity", "`ncu` counts a kernel's executed thread instructions by type and its DRAM bytes "
            "(the cell below). Its achieved arithmetic intensity (FLOP per DRAM byte), the x of its point on the "
            "roofline.",
            lambda r: {"ffma": r.choice([0.5, 1, 2, 4, 8, 17.2]), "fadd": r.choice([0, 0.25, 0.5, 1]),
                       "fmul": r.choice([0, 0.25, 0.5, 1]), "d": r.choice([0.5, 1, 2, 4])},
            given="{ffma:g} billion FFMA, {fadd:g} billion FADD, {fmul:g} billion FMUL; {d:g} GB of DRAM traffic",
            unit="FLOP/byte", rel_tol=0.02),
    Choice("long_scoreboard", "`ncu`'s warp-state statistics show most of a kernel's stall cycles as *Stall Long "
           "Scoreboard*. What are its warps waiting for?",
           {"a": "the result of a load through L1TEX: global or local memory",
            "b": "the other warps of the block at a `__syncthreads()`",
            "c": "a math pipe that is busy with other warps' instructions",
            "d": "the next instruction to be fetched"}),
    Choice("speed_of_light", "`ncu`'s *GPU Speed Of Light Throughput* section shows Compute (SM) Throughput 14% and "
           "Memory Throughput 92%. What does that say, and what is the next step?",
           {"a": "the kernel is memory-bound near the memory roof: reduce the bytes it moves (fuse, reuse data "
                 "on chip, use smaller types)",
            "b": "the kernel is compute-bound: move its math to the tensor cores",
            "c": "the kernel is at 14% of what it could do: raise its occupancy to 100%",
            "d": "the profile is wrong: throughputs must add up to 100%"}),
]
