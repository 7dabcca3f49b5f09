"""The debugging track (L7): its problem kinds, the four sabotaged kernels the student starts from, and the
questions of the diagnosis and the Nsight Compute deep-read.

Kinds (the softmax kernel is of the attention track's ``row_softmax``, whose inputs hold rows of logits in the
hundreds and rows all hundreds below zero):

- ``row_sum``: shape ``(rows, cols)``, fp32 ``x`` in, ``out[r] = sum of row r`` (fp32, ``rows`` values); kernels
  ``(float* out, const float* x, int rows, int cols)``, one block per row. Checked against a float64 sum: each
  value within ``ROW_SUM_RTOL`` x the sum of the row's magnitudes (fp32 rounding of any summation order over these
  sizes is under a quarter of it; a wrong sum is far more). Timed against ``torch.sum`` over the rows, work in bytes
  (the matrix read once, the sums written once).
- ``copy_rows``: shape ``(rows, cols)``, ``out = x``, one block per row, bit-identical; timed against a
  device-to-device copy of the same bytes. Both buffers start on a 16-byte boundary (fresh allocations; the output
  1 MiB into its guarded buffer).

``SABOTAGED`` holds each kernel as the release gives it, one planted bug each, shown numbered in the notebook (a
line question's answer is a line of it; the answers are in ``key.py``, which students do not get). ``QUESTIONS`` is built on first use (`__getattr__`): the grading children,
which import this module for its kinds, never import the quiz engine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from graders.cuda_engine.problems import Problem, Shape, Tensor, copy_bytes, matrix_bytes, random_matrix

ROW_SUM_RTOL = 1e-4


@dataclass(frozen=True)
class RowSums:
    """A row sum's reference: the float64 sums and the sums of the rows' magnitudes (the error's scale)."""

    exact: Tensor
    magnitude: Tensor


def row_sums(inputs: list[Tensor]) -> RowSums:
    x = inputs[0].double()
    return RowSums(x.sum(dim=1), x.abs().sum(dim=1))


def row_sum_mismatch(out: Tensor, expected: RowSums) -> str:
    """'' if every sum is within ROW_SUM_RTOL of its row's magnitude from the float64 sum, else how many are not."""
    import torch
    bad = torch.isnan(out) | ~((out.double() - expected.exact).abs() <= ROW_SUM_RTOL * expected.magnitude)
    count = int(bad.sum())
    if not count:
        return ""
    r = int(bad.nonzero()[0][0])
    got = float(out[r])
    never = " (NaN: never written, or made from one)" if math.isnan(got) else ""
    return (f"{count} of {out.numel()} row sums wrong; first out[{r}]: expected {float(expected.exact[r]):.9g}, got "
            f"{got:.9g}{never}")


def _torch_row_sum(out: Tensor, inputs: list[Tensor]) -> None:
    import torch
    torch.sum(inputs[0], dim=1, out=out)


def _one_block_per_row(shape: Shape, tile: tuple[int, int]) -> tuple[int, int, int]:
    return (shape[0], 1, 1)


ROW_SUM = Problem(
    kind="row_sum",
    signature="(float* out, const float* x, int rows, int cols)",
    shape_names=("rows", "cols"),
    make_inputs=random_matrix,
    out_shape=lambda s: (s[0],),
    reference=row_sums,
    baseline=_torch_row_sum,
    baseline_name="torch.sum over the rows",
    work=lambda s: 4 * s[0] * s[1] + 4 * s[0],
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=_one_block_per_row,
    compare=row_sum_mismatch,
    roof="dram",
)

COPY_ROWS = Problem(
    kind="copy_rows",
    signature="(float* out, const float* in, int rows, int cols)",
    shape_names=("rows", "cols"),
    make_inputs=random_matrix,
    out_shape=lambda s: (s[0], s[1]),
    reference=lambda inputs: inputs[0].clone(),
    baseline=copy_bytes,
    baseline_name="device-to-device copy",
    work=matrix_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=_one_block_per_row,
    roof="dram",
)

PROBLEMS = [ROW_SUM, COPY_ROWS]

# ---- the sabotaged kernels, as released ----------------------------------------------------------------------

SABOTAGED = {
    "reduce": """\
extern "C" __global__ void block_sum(float* out, const float* x, int rows, int cols)
{
    __shared__ float buf[BLOCK_X];
    const int row = blockIdx.x, tid = threadIdx.x;
    float v = 0.0f;
    for (int c = tid; c < cols; c += BLOCK_X) v += x[(size_t)row * cols + c];
    buf[tid] = v;
    for (int s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (s > 32) __syncthreads();
        if (tid < s) buf[tid] += buf[tid + s];
    }
    if (tid == 0) out[row] = buf[0];
}
""",
    "copy": """\
extern "C" __global__ void copy_rows(float* out, const float* in, int rows, int cols)
{
    const size_t start = (size_t)blockIdx.x * cols;
    const float4* src = reinterpret_cast<const float4*>(in + start);
    float4* dst = reinterpret_cast<float4*>(out + start);
    const int vectors = cols / 4;
    for (int i = threadIdx.x; i < vectors; i += BLOCK_X) dst[i] = src[i];
    for (int c = 4 * vectors + threadIdx.x; c < cols; c += BLOCK_X) out[start + c] = in[start + c];
}
""",
    "softmax": """\
extern "C" __global__ void softmax_rows(float* out, const float* x, int rows, int cols)
{
    __shared__ float partial[BLOCK_X / 32];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float* in = x + (size_t)blockIdx.x * cols;
    float* p = out + (size_t)blockIdx.x * cols;
    float sum = 0.0f;
    for (int c = tid; c < cols; c += BLOCK_X) {
        const float e = expf(in[c]);
        p[c] = e;
        sum += e;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < BLOCK_X / 32; ++w) sum += partial[w];
    const float inv = 1.0f / sum;
    for (int c = tid; c < cols; c += BLOCK_X) p[c] *= inv;
}
""",
    "chunked": """\
extern "C" __global__ void chunked_sum(float* out, const float* x, int rows, int cols)
{
    __shared__ float partial[BLOCK_X / 32];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float* in = x + (size_t)blockIdx.x * cols;
    if (lane == 0) partial[warp] = 0.0f;
    __syncthreads();
    for (int c0 = 0; c0 < cols; c0 += BLOCK_X) {
        const int c = c0 + tid;
        float v = c < cols ? in[c] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (c < cols) {
            if (lane == 0) partial[warp] += v;
            __syncthreads();
        }
    }
    if (warp == 0) {
        float v = lane < BLOCK_X / 32 ? partial[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
""",
}


# ---- the questions: the diagnosis of each kernel, then the Nsight Compute deep-read --------------------------

KERNELS = {"reduce": "block_sum", "copy": "copy_rows", "softmax": "softmax_rows", "chunked": "chunked_sum"}
TOOL_OPTIONS = {
    "a": "compute-sanitizer --tool memcheck",
    "b": "compute-sanitizer --tool racecheck",
    "c": "compute-sanitizer --tool initcheck",
    "d": "compute-sanitizer --tool synccheck",
    "e": "none of compute-sanitizer's tools: only the check of the results (wrong values, NaN)",
    "f": "none of compute-sanitizer's tools: only the time limit (the kernel never finishes)",
}
CLASS_OPTIONS = {
    "a": "a shared-memory race: a read not ordered after the write it needs by a barrier",
    "b": "a misaligned access: a vector load or store at an address that is not a multiple of its size",
    "c": "a floating-point overflow: a value becomes inf, then inf/inf or 0 x inf is NaN",
    "d": "a barrier that not every thread of the block reaches",
    "e": "an index out of bounds",
    "f": "a read of memory nothing wrote",
}
# The deep-read's two reports (the notebook shows them): `benchmarks/results/<record>`, each kernel's sections
NCU_RECORDS = {
    "gemm": ("gemm/gemm-ncu-profile-4096-20261202.txt", "sgemm_warptiling",
             "the GEMM worklog's warp-tiled FP32 kernel at M = N = K = 4096"),
    "decode": ("attention/attention-ncu-profile-20261204-8x32x32768x128.txt", "attention_decode",
               "the attention track's decode kernel: batch 8, 32 heads, a KV cache of 32,768 tokens, head_dim 128"),
    "tc": ("tensorcores/tensorcores-ncu-profile-20261204.txt", "tc_warptiling",
           "the tensor-core worklog's warp-tiled bf16 mma.sync kernel at M = N = K = 4096"),
}
LIMIT_OPTIONS = {
    "a": "memory: DRAM bandwidth",
    "b": "compute: the FP32 (FMA) pipes",
    "c": "latency: too few eligible warps to hide the stalls, with memory and compute both far from busy",
}
STALL_OPTIONS = {
    "a": "long scoreboard: waiting for data from L1TEX (global or local memory)",
    "b": "not selected: eligible, but the scheduler issued another warp",
    "c": "barrier: waiting at __syncthreads()",
    "d": "short scoreboard: waiting for shared memory",
    "e": "wait: a fixed-latency dependency (the result of an instruction issued just before)",
}


def _questions() -> list:
    from graders.quiz_engine.questions import Choice, Line, Numeric

    def fixed(rng) -> dict:   # the deep-read's numbers are the report's, the same for every student
        return {}

    questions = []
    for kid, function in KERNELS.items():
        questions += [
            Choice(f"{kid}_tool", f"`{function}`: which tool catches its bug every time, at the shapes where it "
                   "shows, whatever the timing?", TOOL_OPTIONS),
            Line(f"{kid}_line", f"`{function}`: the number of the line that faults, or the line to fix (the "
                 "kernel as the statement above numbers it).", SABOTAGED[kid]),
            Choice(f"{kid}_class", f"`{function}`: what kind of bug is it?", CLASS_OPTIONS),
        ]
    why = {
        "gemm": ("why is its achieved occupancy what it is?", {
            "a": "its registers per thread (and its shared memory per block) let one 256-thread block, 8 warps of "
                 "the 64, run on an SM",
            "b": "its grid has too few blocks to give every SM one",
            "c": "its blocks' work is unbalanced: theoretical occupancy is far higher than achieved",
            "d": "the limit on barriers per SM"}),
        "tc": ("why is its achieved occupancy what it is?", {
            "a": "its registers per thread and its shared memory per block let two 128-thread blocks, 8 warps of "
                 "the 64, run on an SM",
            "b": "its grid has too few blocks to give every SM one",
            "c": "its blocks' work is unbalanced: theoretical occupancy is far higher than achieved",
            "d": "the limit on barriers per SM"}),
        "decode": ("its theoretical occupancy is 75%; why is the achieved one lower?", {
            "a": "its registers per thread allow fewer blocks than the report's theoretical occupancy assumes",
            "b": "its grid is 256 blocks on 132 SMs (0.65 waves): about 1.9 blocks an SM, fewer than the 3 that fit",
            "c": "shared-memory bank conflicts",
            "d": "its warps wait at __syncthreads() for the slowest"}),
    }
    for key, (_, function, what) in NCU_RECORDS.items():
        name = f"`{function}` ({what})"
        questions += [
            Choice(f"{key}_limit", f"{name}: what limits it?", LIMIT_OPTIONS),
            Choice(f"{key}_stall", f"{name}: its top stall reason, as the report names it?", STALL_OPTIONS),
            Numeric(f"{key}_occupancy", f"{name}: its achieved occupancy, in percent?", fixed, unit="%",
                    abs_tol=0.5),
            Choice(f"{key}_occupancy_why", f"{name}: {why[key][0]}", why[key][1]),
            Numeric(f"{key}_dram", f"{name}: its DRAM throughput as a fraction of the peak (0 to 1)?", fixed,
                    abs_tol=0.005),
        ]
    return questions


def __getattr__(name: str):
    """``QUESTIONS``, built on first use (the module's docstring says why)."""
    if name == "QUESTIONS":
        globals()["QUESTIONS"] = found = _questions()
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
