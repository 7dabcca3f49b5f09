"""The kernelbench track's nbgrader source notebook: its introduction and titles; the cells are the model engine's
(`graders.model_engine.notebook`: per problem the statement, the solution cell, the check cell and the graded
cell)."""
from __future__ import annotations

import nbformat

from graders.model_engine import notebook

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
is inside the time), and every timed output checked afterwards; the eager `Model` and `torch.compile(Model)`
are timed the same way by the grader on its own, once for the whole class. **Points**: {correct:g} for a
correct model, up to {perf:g} more by its speed-up over `torch.compile`: none below each problem's floor, all at
its target, linear between. The class's fast_p (KernelBench's share of models that are correct and at least p
times as fast) is reported at p = 1.0 and 1.5.

* Run the **check** cell under each model: it runs {check_trials} trials on public inputs at the problem's small
  sizes, on the GPU where there is one, else on this machine's CPU with Triton kernels in Triton's interpreter
  (`TRITON_INTERPRET=1`), and says ✓, ✗ (with the first wrong value) or ? (it could not finish). A ✗ also fails
  `nbgrader validate`. The check is not the grade: correctness at the problem's sizes and speed are judged on
  the GPU worker."""


def build() -> nbformat.NotebookNode:
    return notebook.build(TRACK, INTRO, TITLES, lambda problem: f"The reference, from KernelBench's `{problem.source}`")
