"""The kernelbench track's nbgrader source notebook, built from its spec, problem.py and reference solutions.

Cells: an introduction, the set-up cell (the imports a ``ModelNew`` cell may use, and the engine's calls), then per
problem in spec order: a markdown statement (the reference ``Model`` as KernelBench gives it, the sizes graded,
the tolerance, the points), the solution cell (grade_id ``<id>``: the reference solution, its kernels and the
bodies of ``ModelNew``'s methods between nbgrader's solution markers, so a release keeps the imports and the
class's outline), a read-only ``<id>_check`` cell (`graders.model_engine.grade.check`) and the graded
``<id>_score`` cell (public: `assert_runs`; hidden: `score_model`). Each problem's cell defines its own
``ModelNew``; the grader takes the one defined above each test cell (`graders.submission`).
"""
from __future__ import annotations

import ast

import nbformat

from graders import notebook as nb
from graders import tracks
from graders.model_engine.grade import CHECK_TRIALS
from graders.model_engine.source import MAX_SOURCE_CHARS
from graders.model_engine.spec import ModelProblem, ModelSpec, load_model_spec

TRACK = "kernelbench"
TITLES = {"relu": "ReLU (KernelBench level 1, problem 19)", "softmax": "Softmax (KernelBench level 1, problem 23)",
          "gemm_multiply_leakyrelu": "GEMM, multiply, LeakyReLU (KernelBench level 2, problem 12)"}

INTRO = """# KernelBench: make a PyTorch model faster

KernelBench's task, as its benchmark poses it to people and to models alike: each problem is a PyTorch
`Model` (its `forward` is the reference), with `get_inputs()` drawing the inputs and `get_init_inputs()` the
constructor's arguments. You write `ModelNew`, a module that computes the same function faster, with Triton
kernels or CUDA C++ kernels it launches from `forward`. {count} problems, two from KernelBench's level 1 (one
operator) and one from level 2 (a small fusion).

**Your cell.** Each problem's solution cell is all the grader reads for it: its imports (only `torch`,
`torch.nn as nn`, `torch.nn.functional as F`, `math`, `triton`, `triton.language as tl`, and
`from graders.model_engine.cuda_kernels import cuda_kernel`), its `@triton.jit` kernels, constants (a CUDA C++
kernel's source is a string constant) and the class `ModelNew`. A CUDA C++ kernel is compiled by the grader
(NVRTC) and launched on PyTorch's current stream: build it in `__init__`, `self.relu = cuda_kernel(RELU,
"relu")` for `RELU = r'''extern "C" __global__ void relu(float* out, const float* x, int n) {{...}}'''`, and
launch it in `forward`, `self.relu(grid, block, out, x, n)`: tensors are passed as pointers, ints as 32-bit
`int`, floats as 32-bit `float`. The grader runs that cell's code, not your notebook: a helper
defined in another cell does not exist there. Its Python runs in the grading process beside the reference and
the checks, so it is held to what a model needs: no other imports, no `eval`, `exec`, `getattr` or `open`, no
attribute that begins with `_`, no assignment to anything but `self`'s attributes (a module such as `torch` or
`F` is never patched), no streams, events, seeds or global switches, and no `load_inline` (CUDA C++ goes through
`cuda_kernel`, whose host side is the grader's). A cell outside these rules is refused with the rule it broke,
before it runs.

**Correct** means: built from the same `get_init_inputs()` as `Model`, after the same `torch.manual_seed`
(create your parameters in the order `Model` creates them and they hold the same values), `ModelNew`'s output
matches `Model`'s within the problem's `atol` and `rtol` (KernelBench's 1e-2) in {trials} trials, each on
fresh inputs from its own hidden seed. The output must be a new dense tensor (no view of an input, no
subclass, no lazy value), and the inputs must be unchanged after your `forward`. **Speed** is the median of
{runs} calls, each on fresh inputs, with the whole GPU synchronised around each call (work on another stream
is inside the time), and every timed output checked afterwards; your model, the eager `Model` and
`torch.compile(Model)` are timed in the same process. **Points**: {correct:g} for a correct model, up to
{perf:g} more by its speed-up over `torch.compile`: none below each problem's floor, all at its target, linear
between. The class's fast_p (KernelBench's share of models that are correct and at least p times as fast) is
reported at p = 1.0 and 1.5.

* Run the **check** cell under each model: it runs {check_trials} trials on public inputs at the problem's small
  sizes, on the GPU where there is one, else on this machine's CPU with Triton kernels in Triton's interpreter
  (`TRITON_INTERPRET=1`), and says ✓, ✗ (with the first wrong value) or ? (it could not finish). A ✗ also fails
  `nbgrader validate`. The check is not the grade: correctness at the problem's sizes and speed are judged on
  the GPU worker."""

SETUP = """import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

from graders.model_engine.grade import assert_runs, check, score_model"""


def _model_text(problem_id: str) -> str:
    """The problem's module as KernelBench gives it (problem.py's ``SOURCES``)."""
    return tracks.get(TRACK).problem_module().SOURCES[problem_id].strip("\n")


def _statement(number: int, spec: ModelSpec, problem: ModelProblem) -> str:
    sizes = ", ".join(f"`{name}` = {value:,}" for name, value in problem.sizes.items())
    small = ", ".join(f"`{name}` = {value:,}" for name, value in problem.cpu_sizes.items())
    provisional = " (provisional until measured on the grading GPU)" if spec.targets == "provisional" else ""
    return "\n".join([
        f"## {number}. {TITLES[problem.id]}", "",
        f"The reference, from KernelBench's `{problem.source}`:", "", "```python", _model_text(problem.id), "```", "",
        f"* **Graded at:** {sizes} (the module's globals are set to these before `get_inputs()` runs); the check "
        f"cell's sizes: {small}.",
        f"* **Tolerance:** `atol` = {problem.atol:g}, `rtol` = {problem.rtol:g}.",
        f"* **Points:** {spec.points_correct:g} for a correct `ModelNew`, up to {spec.points_perf:g} more by its "
        f"speed-up over `torch.compile(Model)`: none below {problem.floor:g}x, all at {problem.target:g}x"
        f"{provisional}.",
    ])


def solution_source(reference: str) -> str:
    """A reference solution as its problem's cell: its leading ``#`` lines dropped; the imports kept; everything
    else at the top level (the kernels) between nbgrader's solution markers; ``class ModelNew``'s methods kept
    with their bodies between markers (``__init__``'s ``super().__init__()`` kept)."""
    lines = reference.rstrip("\n").split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    while lines and not lines[0].strip():
        lines.pop(0)
    tree = ast.parse("\n".join(lines))
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    after_imports = imports[-1].end_lineno
    out = lines[:after_imports] + ["", "", "### BEGIN SOLUTION", *_trimmed(lines[after_imports:model.lineno - 1]),
                                   "### END SOLUTION", "", ""]
    out += lines[model.lineno - 1:model.body[0].lineno - 1]
    for method in model.body:
        start = method.body[0].lineno - 1
        kept = method.body[1:] if method.name == "__init__" and "super().__init__()" in ast.unparse(method.body[0]) \
            else method.body
        out += lines[method.lineno - 1:start]
        if kept is not method.body:
            out.append(lines[start])
        body = lines[kept[0].lineno - 1:method.end_lineno] if kept else []
        out += ["        ### BEGIN SOLUTION", *body, "        ### END SOLUTION", ""]
    return "\n".join(out).rstrip("\n")


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _cells(spec: ModelSpec, problem: ModelProblem) -> list[nbformat.NotebookNode]:
    args = f"{TRACK!r}, {problem.id!r}, ModelNew"
    source = solution_source(problem.reference.read_text())
    assert len(source) < MAX_SOURCE_CHARS, problem.id
    return [nb.solution(source, problem.id),
            nb.check_cell(f"check({args})", f"{problem.id}_check", problem.id),
            nb.graded_test(f"assert_runs({args})", f"score_model({args})", f"{problem.id}_score",
                           spec.max_points, "correctness and speed-up, on the GPU worker")]


def build() -> nbformat.NotebookNode:
    spec = load_model_spec(TRACK)
    cells = [nb.markdown(INTRO.format(count=len(spec.problems), trials=spec.trials, runs=spec.timed_runs,
                                      correct=spec.points_correct, perf=spec.points_perf, check_trials=CHECK_TRIALS)),
             nb.locked(SETUP, "setup")]
    for number, problem in enumerate(spec.problems.values(), start=1):
        cells.append(nb.markdown(_statement(number, spec, problem)))
        cells += _cells(spec, problem)
    return nb.notebook(cells, language=nb.MODEL_LANGUAGE)
