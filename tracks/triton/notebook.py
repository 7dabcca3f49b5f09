"""The Triton track's nbgrader source notebook, built from its spec, the problem kinds it grades and its reference
kernels.

Cells: an introduction, the set-up cell (``triton``, ``tl`` and the engine's calls), then per kernel in spec
order: a markdown statement (title, the reference's leading comment, signature, launch, sizes, speed, points),
the solution cell (grade_id ``<id>``: the reference, its kernel's body between nbgrader's solution markers, then
its launch ``<id>_launch``, which an autotuned kernel has not), a read-only ``<id>_check`` cell (`graders.triton_engine.grade.check`) and the graded
``<id>_score`` cell (public: `assert_runs`; hidden: `score_triton`).
"""
from __future__ import annotations

import ast

import nbformat

from graders import notebook as nb
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import KernelSpec
from graders.triton_engine.kernel_source import MAX_AUTOTUNE_CONFIGS
from graders.triton_engine.spec import AUTOTUNE, ROW, Launch, TritonSpec, load_triton_spec
from graders.targets_gpu import targets_note

TRACK = "triton"
TITLES = {"add": "Vector add", "softmax": "Fused row softmax", "layernorm": "Layer norm (forward)",
          "matmul_fp16": "Tiled matmul, fp16, autotuned", "matmul_bf16": "The same matmul in bf16"}
_MATMUL = ("(out_ptr, a_ptr, b_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, "
           "BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr)")
SIGNATURES = {"vecadd": "(out_ptr, a_ptr, b_ptr, n, BLOCK_SIZE: tl.constexpr)",
              "row_softmax": "(out_ptr, x_ptr, rows, cols, BLOCK_SIZE: tl.constexpr)",
              "layer_norm": "(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps, BLOCK_SIZE: tl.constexpr)",
              "matmul_fp16": _MATMUL, "matmul_bf16": _MATMUL}
WHAT = {"vecadd": "`out[i] = a[i] + b[i]` for fp32 vectors of `n` elements, bit for bit",
        "row_softmax": ("each row's softmax of an fp32 (rows, cols) matrix, row-major and contiguous, in fp32: "
                        "within a relative 2e-5 of a float64 softmax at every element. Some rows hold logits in the "
                        "hundreds (`exp` overflows fp32 above 88.7) or all hundreds below zero"),
        "layer_norm": ("each row of an fp32 (rows, cols) matrix, row-major and contiguous, normalised to mean 0 and "
                       "(biased) variance 1, times `w` plus `b` (fp32 vectors of `cols`): `(x - mean) / "
                       "sqrt(variance + eps) * w + b`, with `eps` the kernel's argument (1e-5), within 2e-4 x "
                       "(|w| + 1) + 1e-4 x |out| of a float64 layer norm. Some rows' means are a hundred standard "
                       "deviations from 0"),
        "matmul_fp16": ("`out = a @ b` for an fp16 (M, K) matrix `a` and an fp16 (K, N) matrix `b`, row-major and "
                        "contiguous, into fp16 `out` (M, N), the products summed in fp32: within one fp16 unit in the "
                        "last place (plus 2^-20 x K) of the fp32 product"),
        "matmul_bf16": ("the same product in bf16: within one bf16 unit in the last place (plus 2^-20 x K) of the "
                        "fp32 product")}

INTRO = """# Triton: kernels in Python

The first rung of the abstraction ladder above CUDA C++: {count} kernels in Triton, where a program works on
whole blocks of values (`tl.arange`, `tl.load`, `tl.store`, `tl.max`, `tl.sum`) and the compiler picks the
threads, the vector widths and the shared memory. Write each `@triton.jit` function in its cell; only the
`@triton.jit` functions of the cell are graded, with `triton` and `tl` (`triton.language`) as the names they
may use. You never launch the kernel: the grader does, `kernel[grid](out, *inputs, *sizes, BLOCK_SIZE=...,
num_warps=...)`, with the grid and `BLOCK_SIZE` each step states and the `num_warps` (and, where the step
says so, `BLOCK_SIZE`) of the launch dict under your kernel; the matmul's tiles, warps and stages are the
configs of its `@triton.autotune`, which the grader reads from your cell and applies itself.

**Correct** means right on fresh random inputs at several awkward sizes: `out` is filled with NaN before
every run and fenced by guard bands, every input sits between NaN fences, and correctness is checked again
after timing. **Speed** is the ratio of the step's baseline time to your kernel's, both measured in the same
process on the grading GPU. Each kernel earns points for being correct and more for speed: none below its
floor ratio, full at its target, linear between. A kernel that is wrong, writes outside `out`, crashes, hangs
or does not compile scores 0.

* Run the **check** cell under each kernel: it runs your kernel at the smaller check sizes on public inputs,
  on the GPU where there is one, else in Triton's interpreter on this machine's CPU (`TRITON_INTERPRET=1`),
  and says ✓ (right there), ✗ (wrong, with the size and the first wrong value) or ? (it could not finish). A ✗
  also fails `nbgrader validate`. The check is not the grade: correctness at every size and speed are judged
  on the GPU worker."""

SETUP = """import triton
import triton.language as tl

from graders.triton_engine.grade import assert_runs, check, score_triton"""


def _launch(kid: str, launch: Launch, kind: str) -> str:
    if launch.block_size == AUTOTUNE:
        x, y = launch.autotune_tile
        return (f"**Launch:** one program per `{y}` x `{x}` tile of `out`, numbered from 0 along one grid "
                f"axis (the kernel orders the tiles). The tile sizes, `num_warps` and `num_stages` are your "
                f"`@triton.autotune` configs', written as literals above `@triton.jit` (at most "
                f"{MAX_AUTOTUNE_CONFIGS}, each setting `{x}` and `{y}`), with `key` the parameters a new "
                f"tuning follows; the grader reads them from the cell, and Triton times each config on the GPU "
                f"worker and runs the fastest (the interpreter on a CPU runs the first).")
    grid = ("one program per row; `BLOCK_SIZE` is the grader's: the next power of two at least `cols`"
            if launch.block_size == ROW else
            f"ceil(n / BLOCK_SIZE) programs; `BLOCK_SIZE` is yours (default {launch.block_size})")
    return (f"**Launch:** {grid}. Set `num_warps`{'' if launch.block_size == ROW else ' and `BLOCK_SIZE`'} in "
            f"`{kid}_launch` (powers of two).")


def _leading_comment(reference: str) -> str:
    """The ``#`` comment lines a reference starts with, as one paragraph."""
    lines = []
    for line in reference.split("\n"):
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return " ".join(lines)


def _statement(number: int, kernel: KernelSpec, launch: Launch, note: str) -> str:
    kind = problem(kernel.kind, "triton")
    perf = kernel.perf_shape
    return "\n".join([
        f"## {number}. {TITLES[kernel.id]}", "",
        _leading_comment(kernel.reference.read_text()), "",
        f"* **Computes:** {WHAT[kernel.kind]}.",
        f"* **Signature:** `{kernel.function}{SIGNATURES[kernel.kind]}`.",
        "* " + _launch(kernel.id, launch, kernel.kind),
        "* **Sizes checked:** " + ", ".join(" x ".join(f"{v:,}" for v in s) for s in kernel.check_shapes) + ".",
        f"* **Speed:** against {kind.baseline_name}, timed at {' x '.join(f'{v:,}' for v in perf)} ("
        + (f"{kind.work(perf) / 2**20:,.0f} MiB moved" if kind.work_unit == "B" else
           f"{kind.work(perf) / 1e9:,.0f} G{kind.work_unit}") + " per launch).",
        f"* **Points:** {kernel.points_correct:g} for a correct kernel, up to {kernel.points_perf:g} more for "
        f"speed: full at {kernel.target:g} of {kind.baseline_name}'s speed, none below {kernel.floor:g}"
        + note + ".",
    ])


def solution_source(reference: str, function: str) -> str:
    """A reference file as a solution cell: its leading ``#`` lines dropped, the body of ``function`` between
    nbgrader's solution markers."""
    lines = reference.rstrip("\n").split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "\n".join(lines)
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == function)
    start, end = node.body[0].lineno - 1, node.end_lineno
    return "\n".join([*lines[:start], "    ### BEGIN SOLUTION", *lines[start:end], "    ### END SOLUTION",
                      *lines[end:]])


def _cells(spec: TritonSpec, kid: str) -> list[nbformat.NotebookNode]:
    kernel = spec.kernel(kid)
    launch = "" if spec.launches[kid].block_size == AUTOTUNE else f", {kid}_launch"
    args = f"{TRACK!r}, {kid!r}, {kernel.function}{launch}"
    return [nb.solution(solution_source(kernel.reference.read_text(), kernel.function), kid),
            nb.check_cell(f"check({args})", f"{kid}_check", kid),
            nb.graded_test(f"assert_runs({args})", f"score_triton({args})", f"{kid}_score", kernel.points,
                           "correctness and speed, on the GPU worker")]


def build() -> nbformat.NotebookNode:
    spec = load_triton_spec(TRACK)
    cells = [nb.markdown(INTRO.format(count=len(spec.assignment.kernels))), nb.locked(SETUP, "setup")]
    for number, kid in enumerate(spec.assignment.kernels, start=1):
        cells.append(nb.markdown(_statement(number, spec.kernel(kid), spec.launches[kid],
                                            targets_note(spec.assignment.targets, spec.assignment.measured_in))))
        cells += _cells(spec, kid)
    return nb.notebook(cells)
