"""Lecture 1, "How fast can this go?": the PyTorch operations whose regime, intensity and time the student predicts
(public: the student kit and the grading child hold it; the answers are in key.py)."""
from graders.roofline_engine.operations import Operation, Tensor

TITLE = "How fast can this go? Predict, then measure"
INTRO = """
Lecture 1's habit, from the chapters *The three regimes: compute, memory, overhead* and *Speed-of-light thinking &
the roofline*: before you measure anything, say what an operation waits on and how fast it can possibly go, then
measure and compare. A GPU does two things, arithmetic and moving data, and a third thing gets in their way:
launching the work. So every operation is bound by one of three walls:

- **compute**: the arithmetic units are busy; the time is at least FLOPs / (the peak rate of its number format);
- **memory**: the arithmetic waits for data; the time is at least bytes / (the memory bandwidth);
- **overhead**: the GPU waits for the host (Python, PyTorch's dispatch, the kernel launch); the time is about
  what launching the PyTorch operations costs. One operation alone, on an idle GPU, costs its whole launch
  latency (about LAUNCH_ALONE, "The worker" below); in a stream of operations the host's work for the next one
  overlaps the GPU's on the last, so each further one adds less (about LAUNCH_IN_STREAM): n operations in a row
  take about LAUNCH_ALONE + (n - 1) x LAUNCH_IN_STREAM.

The roofline puts the first two in one picture: an operation of arithmetic intensity I (FLOP per byte) can reach at
most min(peak, I x bandwidth) FLOP/s. Below the ridge point (peak / bandwidth) it is memory-bound, above it
compute-bound; and an operation too small to keep the GPU busy sits far under its roof, bound by overhead.

For each PyTorch operation below, predict its regime, its arithmetic intensity and its time on the course's
reference GPU ("The worker" below). The grader measures every one on the grading worker's GPU and grades your
prediction against that measurement, translated to the reference GPU where the worker's figures differ.
"""
SMALL = 4096                 # elements of the small tensors
ADD = 1 << 27                # elements of each vector of the huge add (512 MiB in fp32)
SUM = 1 << 28                # elements summed in the huge reduction (1 GiB in fp32)
MATVEC = 16384               # the square fp32 matrix of the matrix-vector product (1 GiB)
OUTER = 16384                # the output of the thin matmul: OUTER x OUTER bf16 (512 MiB)
THIN = 64                    # the thin matmul's inner dimension
SOFTMAX_ROWS, SOFTMAX_COLS = 65536, 1024        # the softmax's fp32 matrix (256 MiB)
NORM_ROWS, NORM_COLS = 32768, 2048              # the layer norm's fp32 matrix (256 MiB)
TRANSPOSE = 8192             # the square fp32 matrix transposed, then summed (256 MiB)
SQUARE = 4096                # the square matmuls
CHAIN = 10                   # rounds of the chain of tiny operations (two operations each)


def chain_code(rounds: int) -> str:
    """The chain of tiny operations: ``rounds`` rounds of a multiply and an add on ``x``."""
    return f"for _ in range({rounds}):\n    x = x * 0.5 + 1.0"


OPERATIONS = [
    Operation("add_small", "Elementwise add, small", "c = a + b",
              {"a": Tensor((SMALL,)), "b": Tensor((SMALL,))},
              text="Two vectors of 4,096 fp32 numbers added."),
    Operation("add_huge", "Elementwise add, huge", "c = a + b",
              {"a": Tensor((ADD,)), "b": Tensor((ADD,))},
              text="The same line on two vectors of 2^27 fp32 numbers (512 MiB each)."),
    Operation("sum_small", "Reduction, small", "s = x.sum()", {"x": Tensor((SMALL,))},
              text="The sum of 4,096 fp32 numbers.", flops="A sum of N numbers: count N FLOPs."),
    Operation("sum_huge", "Reduction, huge", "s = x.sum()", {"x": Tensor((SUM,))},
              text="The sum of 2^28 fp32 numbers (1 GiB).", flops="A sum of N numbers: count N FLOPs."),
    Operation("matvec", "Matrix times vector", "y = W @ v",
              {"W": Tensor((MATVEC, MATVEC)), "v": Tensor((MATVEC,))},
              text="A 16384 x 16384 fp32 matrix (1 GiB) times a vector: the skinniest matmul (N = 1)."),
    Operation("matmul_outer", "A matmul with a thin inner dimension", "C = A @ B",
              {"A": Tensor((OUTER, THIN), "bf16"), "B": Tensor((THIN, OUTER), "bf16")}, peak="bf16",
              text="A 16384 x 64 times a 64 x 16384 bf16 matrix (a bf16 output, on the tensor cores). 2MNK FLOPs "
                   "like any matmul, but look at what it writes."),
    Operation("matmul_fp32", "Square matmul, fp32", "C = A @ B",
              {"A": Tensor((SQUARE, SQUARE)), "B": Tensor((SQUARE, SQUARE))},
              text="4096 x 4096 times 4096 x 4096 in fp32 (TF32 off: the FP32 pipes, not the tensor cores)."),
    Operation("matmul_bf16", "Square matmul, bf16", "C = A @ B",
              {"A": Tensor((SQUARE, SQUARE), "bf16"), "B": Tensor((SQUARE, SQUARE), "bf16")}, peak="bf16",
              text="The same shape in bf16, on the tensor cores (a bf16 output)."),
    Operation("softmax", "Softmax", "y = torch.softmax(x, dim=-1)", {"x": Tensor((SOFTMAX_ROWS, SOFTMAX_COLS))},
              text="The softmax of each row of a 65536 x 1024 fp32 matrix.",
              flops="Count 5 FLOPs per element (the row's max, the subtraction, exp, the row's sum, the division)."),
    Operation("layer_norm", "Layer norm", f"y = F.layer_norm(x, ({NORM_COLS},), w, b)",
              {"x": Tensor((NORM_ROWS, NORM_COLS)), "w": Tensor((NORM_COLS,)), "b": Tensor((NORM_COLS,))},
              text="Layer norm over each row of a 32768 x 2048 fp32 matrix, with a weight and a bias.",
              flops="Count 8 FLOPs per element of x (mean, subtraction, square, variance, normalisation, weight, "
                    "bias)."),
    Operation("chain", "A chain of tiny operations", chain_code(CHAIN),
              {"x": Tensor((SMALL,))}, operations=2 * CHAIN,
              text="Twenty elementwise operations in a row (ten rounds of a multiply and an add) on 4,096 fp32 "
                   "numbers, as eager PyTorch runs them: each one its own kernel, each result written to memory "
                   "and read back by the next."),
    Operation("transpose_sum", "Transpose, then sum", "s = x.t().contiguous().sum(dim=1)",
              {"x": Tensor((TRANSPOSE, TRANSPOSE))}, operations=2,
              text="An 8192 x 8192 fp32 matrix transposed into a new tensor, whose rows are then summed. "
                   "`contiguous()` writes the transposed matrix row by row, so it reads `x` down its columns.",
              flops="Count the sum's adds: one per element."),
]
