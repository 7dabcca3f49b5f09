"""Lecture 1's quiz, "How fast can this go?": its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 1: how fast can this go?"
INTRO = """
From the chapters *What "fast" actually means*, *Speed-of-light thinking & the roofline* and *The roofline model
in practice*: which of the three regimes bounds an operation, its arithmetic intensity, a GPU's ridge point and
the fastest a kernel can possibly run. FLOPs count one multiply or one add; bytes are those read from and written
to the GPU's memory (DRAM), each tensor read or written once; 1 TB/s = 10^12 bytes per second.
"""
DTYPES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp8": 1}
GPUS = [(19.5, 1.555), (60.0, 2.0), (67.0, 3.35), (989.0, 3.35), (495.0, 4.8), (2250.0, 8.0)]

QUESTIONS = [
    Choice("add_regime", "`c = a + b` on two vectors of 200 million fp32 elements on a modern data-centre GPU. "
           "What bounds its time?",
           {"a": "compute: the GPU's FP32 rate", "b": "memory bandwidth: the bytes it must move",
            "c": "overhead: launching the kernel and the framework's work on the CPU"}),
    Numeric("add_intensity", "The arithmetic intensity of `c = a + b` on *N* elements of the type the cell below "
            "gives you (FLOP per byte moved, `a` and `b` read once, `c` written once).",
            lambda r: {"n": r.choice([1 << 20, 1 << 24, 1 << 26]), "dtype": r.choice(list(DTYPES))},
            given="N = {n:,} elements of {dtype}", unit="FLOP/byte", rel_tol=0.02),
    Numeric("ridge", "A GPU's peak arithmetic rate is *P* TFLOP/s and its memory bandwidth *B* TB/s (the cell below "
            "gives your GPU). Its ridge point: the arithmetic intensity above which a kernel can be compute-bound.",
            lambda r: dict(zip(("p", "b"), r.choice(GPUS))),
            given="P = {p:g} TFLOP/s, B = {b:g} TB/s", unit="FLOP/byte", rel_tol=0.02),
    Numeric("matmul_intensity", "`C = A @ B` with square *N* x *N* fp32 matrices: 2N³ FLOPs, and A, B read and C "
            "written once. Its arithmetic intensity.",
            lambda r: {"n": r.choice([256, 512, 1024, 2048, 4096, 8192])},
            given="N = {n}", unit="FLOP/byte", rel_tol=0.02),
    Numeric("attainable", "On the roofline of a GPU with peak *P* TFLOP/s and bandwidth *B* TB/s, the highest rate "
            "a kernel of arithmetic intensity *I* can reach.",
            lambda r: {"p": 989.0, "b": 3.35, "i": r.choice([0.25, 2, 16, 64, 128, 512, 1024])},
            given="P = {p:g} TFLOP/s, B = {b:g} TB/s, I = {i:g} FLOP/byte", unit="TFLOP/s", rel_tol=0.02),
    Numeric("add_floor", "The speed-of-light time of `c = a + b` on *N* fp32 elements on a GPU of bandwidth *B* "
            "TB/s: the least time in which its bytes can move.",
            lambda r: {"n": r.choice([1 << 24, 1 << 26, 1 << 28]), "b": r.choice([2.0, 3.35, 4.8])},
            given="N = {n:,}, B = {b:g} TB/s", unit="µs", rel_tol=0.03),
    Choice("tiny_ops", "Fifty elementwise PyTorch operations in a row, each on a tensor of 1,000 fp32 elements, run "
           "eagerly on the GPU. What bounds their total time?",
           {"a": "compute: the GPU's FP32 rate", "b": "memory bandwidth: the bytes they move",
            "c": "overhead: launching fifty kernels and the framework's work on the CPU"}),
    Line("timing", "This cell reports a matmul's TFLOP/s. Before which line must `torch.cuda.synchronize()` be "
         "added for the number to be right?",
         """\
x = torch.randn(8192, 8192, device="cuda")
torch.cuda.synchronize()
start = time.perf_counter()
y = x @ x
elapsed = time.perf_counter() - start
print(f"{2 * 8192**3 / elapsed / 1e12:.1f} TFLOP/s")"""),
]
