"""The TileLang track's nbgrader source notebook, built from its spec, the problem kinds it grades and its reference
kernels.

Cells: an introduction, the set-up cell (``tilelang``, ``T`` and the engine's calls), then per kernel in spec
order: a markdown statement (title, the reference's leading comment, the prim_func's signature, sizes, speed,
points), the solution cell (grade_id ``<id>``: the reference's ``@tilelang.jit`` builder, its body between
nbgrader's solution markers, so that the release keeps its signature and tuning defaults), a read-only
``<id>_check`` cell (`graders.tilelang_engine.grade.check`) and the graded ``<id>_score`` cell (public:
`assert_runs`; hidden: `score_tilelang`).
"""
from __future__ import annotations

import ast

import nbformat

from graders import notebook as nb
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import KernelSpec
from graders.tilelang_engine.spec import load_tilelang_spec
from graders.targets_gpu import targets_note

TRACK = "tilelang"
TITLES = {"matmul_fp16": "GEMM, fp16 in, fp32 accumulate", "softmax": "Fused row softmax"}
SIGNATURES = {"matmul_fp16": ('(out: T.Tensor((M, N), "float16"), a: T.Tensor((M, K), "float16"), '
                              'b: T.Tensor((K, N), "float16"))'),
              "row_softmax": '(out: T.Tensor((rows, cols), "float32"), x: T.Tensor((rows, cols), "float32"))'}
WHAT = {"matmul_fp16": ("`out = a @ b` for an fp16 (M, K) matrix `a` and an fp16 (K, N) matrix `b`, row-major and "
                        "contiguous, into fp16 `out` (M, N), the products summed in fp32: within one fp16 unit in the "
                        "last place (plus 2^-20 x K) of the fp32 product. N and K are multiples of 8 (each row of "
                        "`a` and `b` starts on a 16-byte boundary, as a TMA tensor map needs), M, N and K are not "
                        "multiples of your tiles"),
        "row_softmax": ("each row's softmax of an fp32 (rows, cols) matrix, row-major and contiguous, in fp32: "
                        "within a relative 2e-5 of a float64 softmax at every element. Some rows hold logits in the "
                        "hundreds (`exp` overflows fp32 above 88.7) or all hundreds below zero")}
SIZES = {"matmul_fp16": 'M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")',
         "row_softmax": 'rows, cols = T.dynamic("rows"), T.dynamic("cols")'}

INTRO = """# TileLang: tiles you place, a compiler that schedules them

The abstraction ladder, rung by rung: you wrote the GEMM by hand in CUDA C++ (every swizzle, vector load and
warp tile typed out), then in Triton (a program per block of values; the compiler picks threads, shared memory
and the pipeline). TileLang sits between Triton and CUTLASS: you say where each tile lives (`T.alloc_shared`
for shared memory, `T.alloc_fragment` for registers spread over the block's threads), how the K loop is staged
(`T.Pipelined(..., num_stages=...)`) and what moves and multiplies (`T.copy`, `T.gemm`), and TileLang infers
the layouts and emits the Hopper machinery itself: TMA loads, `wgmma`, warp specialisation. The same {count}
kernels as the Triton track, against the same baselines, so that the rungs compare: lines of code against
speed.

Write each kernel as TileLang writes one: a builder decorated with `@tilelang.jit` whose parameters are your
tuning knobs (tile sizes, `num_stages`, `threads`) with literal defaults, whose body declares the sizes
`T.dynamic` (one compile serves every shape), defines one `@T.prim_func` and returns it. Only the builder is
graded, with `T` (`tilelang.language`) as the module it may use; the grader reads it from your cell, calls it
with its defaults, compiles the prim_func for the grading GPU and launches it itself, `kernel(out, *inputs)`.

**Correct** means right on fresh random inputs at several awkward sizes: `out` is filled with NaN before every
run and fenced by guard bands, every input sits between NaN fences, and correctness is checked again after
timing. **Speed** is the ratio of the step's baseline time to your kernel's, both measured in the same process on
the grading GPU. Each kernel earns points for being correct and more for speed: none below its floor ratio, full
at its target, linear between. A kernel that is wrong, writes outside `out`, crashes, hangs or does not compile
scores 0.

* Run the **check** cell under each kernel. On a machine with a GPU it runs your kernel at the check sizes on
  public inputs and says ✓ or ✗ (with the size and the first wrong value). Without one it compiles your kernel
  (TileLang lowers it to CUDA C++ for the grading GPU, sm_90a; no GPU or nvcc needed) and says ✗ if it does not
  compile, else ? with what it compiled to (its lines of CUDA C++, whether it loads through TMA and multiplies
  with wgmma): it cannot run it. A ✗ also fails `nbgrader validate`. The check is not the grade: correctness at
  every size and speed are judged on the GPU worker."""

SETUP = """import tilelang
import tilelang.language as T

from graders.tilelang_engine.grade import assert_runs, check, score_tilelang"""


def _leading_comment(reference: str) -> str:
    """The ``#`` comment lines a reference starts with, as one paragraph."""
    lines = []
    for line in reference.split("\n"):
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return " ".join(lines)


def _statement(number: int, kernel: KernelSpec, note: str) -> str:
    kind = problem(kernel.kind, TRACK)
    perf = kernel.perf_shape
    size = (f"{kind.work(perf) / 2**20:,.0f} MiB moved" if kind.work_unit == "B" else
            f"{kind.work(perf) / 1e9:,.0f} G{kind.work_unit}")
    return "\n".join([
        f"## {number}. {TITLES[kernel.id]}", "",
        _leading_comment(kernel.reference.read_text()), "",
        f"* **Computes:** {WHAT[kernel.kind]}.",
        f"* **Builder:** `@tilelang.jit def {kernel.function}(...)`, its knobs' defaults yours; its sizes "
        f"`{SIZES[kernel.kind]}`; the `@T.prim_func` it returns takes `{SIGNATURES[kernel.kind]}`, output first.",
        "* **Sizes checked:** " + ", ".join(" x ".join(f"{v:,}" for v in s) for s in kernel.check_shapes) + ".",
        f"* **Speed:** against {kind.baseline_name}, timed at {' x '.join(f'{v:,}' for v in perf)} ({size} per "
        "launch).",
        f"* **Points:** {kernel.points_correct:g} for a correct kernel, up to {kernel.points_perf:g} more for "
        f"speed: full at {kernel.target:g} of {kind.baseline_name}'s speed, none below {kernel.floor:g}"
        + note + ".",
    ])


def solution_source(reference: str, function: str) -> str:
    """A reference file as a solution cell: its leading ``#`` lines dropped, the body of the builder ``function``
    between nbgrader's solution markers."""
    lines = reference.rstrip("\n").split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    node = next(n for n in ast.parse("\n".join(lines)).body if isinstance(n, ast.FunctionDef) and n.name == function)
    start, end = node.body[0].lineno - 1, node.end_lineno
    return "\n".join([*lines[:start], "    ### BEGIN SOLUTION", *lines[start:end], "    ### END SOLUTION",
                      *lines[end:]])


def _cells(kernel: KernelSpec) -> list[nbformat.NotebookNode]:
    kid = kernel.id
    args = f"{TRACK!r}, {kid!r}, {kernel.function}"
    return [nb.solution(solution_source(kernel.reference.read_text(), kernel.function), kid),
            nb.check_cell(f"check({args})", f"{kid}_check", kid),
            nb.graded_test(f"assert_runs({args})", f"score_tilelang({args})", f"{kid}_score", kernel.points,
                           "correctness and speed, on the GPU worker")]


def build() -> nbformat.NotebookNode:
    spec = load_tilelang_spec(TRACK)
    cells = [nb.markdown(INTRO.format(count=len(spec.kernels))), nb.locked(SETUP, "setup")]
    for number, kernel in enumerate(spec.kernels.values(), start=1):
        cells.append(nb.markdown(_statement(number, kernel, targets_note(spec.targets, spec.measured_in))))
        cells += _cells(kernel)
    return nb.notebook(cells)
