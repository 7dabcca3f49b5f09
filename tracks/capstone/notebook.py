"""The capstone's nbgrader source notebook, built from its spec, problem.py and reference solutions as the
kernelbench track's is (tracks/kernelbench/notebook.py: each problem's solution cell from its reference by that
notebook's ``solution_source``, its check cell and its graded cell), with the capstone's introduction and
statements: the leaderboard each problem's best kernels are ranked on (`gradebook.leaderboard`)."""
from __future__ import annotations

import importlib.util

import nbformat

from graders import notebook as nb
from graders import tracks
from graders.model_engine.grade import CHECK_TRIALS
from graders.model_engine.source import MAX_SOURCE_CHARS
from graders.model_engine.spec import ModelProblem, ModelSpec, load_model_spec

TRACK = "capstone"
TITLES = {"attention_block": "A transformer's causal self-attention (prefill)",
          "w8a16_gemm": "An int8 weight-only quantized GEMM (W8A16) at a decode step",
          "swiglu_mlp": "A transformer's SwiGLU feed-forward layer (prefill)"}

INTRO = """# Capstone: a served transformer's kernels, on the class leaderboard

{count} problems at the shapes a served model runs, each a PyTorch `Model` in KernelBench's form (as in the
kernelbench assignment): its `forward` is the reference, `get_inputs()` draws the inputs and
`get_init_inputs()` the constructor's arguments. You write `ModelNew`, computing the same function faster:
Triton or CUDA C++ kernels launched from `forward`, fused where the reference makes several passes over memory,
beside PyTorch's own operators where those are already the fastest. Half precision (fp16) throughout.

**Your cell.** Each problem's solution cell is all the grader reads for it: its imports (only `torch`,
`torch.nn as nn`, `torch.nn.functional as F`, `math`, `triton`, `triton.language as tl`, and
`from graders.model_engine.cuda_kernels import cuda_kernel` for CUDA C++ kernels, as in the kernelbench
assignment), its `@triton.jit` kernels, constants and the class `ModelNew`, held to the rules of the kernelbench
assignment (no other imports, no `eval`, `exec`, `getattr` or `open`, no attribute that begins with `_`, nothing
assigned but `self`'s attributes, no streams, events, seeds, global switches or `load_inline`). A cell outside
them is refused with the rule it broke. Build your parameters as `Model` builds them, in the same order, so the same seed gives the
same values (`nn.Parameter(..., requires_grad=False)` holds a tensor that is no trained weight).

**Correct** means `ModelNew`'s output matches `Model`'s within the problem's `atol` and `rtol` in {trials}
trials, each on fresh inputs from its own hidden seed; a new dense tensor, the inputs unchanged. **Speed** is
the median of {runs} calls, each on fresh inputs, the whole GPU synchronised around each call, every timed
output checked afterwards; your model, the eager `Model` and `torch.compile(Model)` are timed in the same
process. **Points**: {correct:g} for a correct model, up to {perf:g} more by its speed-up over `torch.compile`,
none below each problem's floor, all at its target.

**The leaderboard.** Each problem's correct submissions are ranked by their speed-up over `torch.compile`, beside
the machine's rows: PyTorch eager and `torch.compile` (timed in your own gradings), the vendor library's kernel
where there is one (PyTorch's `scaled_dot_product_attention` for the attention) and kernels an AI model wrote
for these problems, graded as yours are. The public page names you by a pseudonym; your own page (its link
comes from your TA) marks your rows and, where your submission is not ranked, says why.

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


def _kernelbench_notebook():
    """tracks/kernelbench/notebook.py, whose ``solution_source`` makes a reference into its problem's cell."""
    path = tracks.get("kernelbench").folder / "notebook.py"
    spec = importlib.util.spec_from_file_location("tracks.kernelbench.notebook_for_capstone", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _statement(number: int, spec: ModelSpec, problem: ModelProblem) -> str:
    sizes = ", ".join(f"`{name}` = {value:,}" for name, value in problem.sizes.items())
    small = ", ".join(f"`{name}` = {value:,}" for name, value in problem.cpu_sizes.items())
    provisional = " (provisional until measured on the grading GPU)" if spec.targets == "provisional" else ""
    model = tracks.get(TRACK).problem_module().SOURCES[problem.id].strip("\n")
    return "\n".join([
        f"## {number}. {TITLES[problem.id]}", "",
        "The reference:", "", "```python", model, "```", "",
        f"* **Graded at:** {sizes} (the module's globals are set to these before `get_inputs()` runs); the check "
        f"cell's sizes: {small}.",
        f"* **Tolerance:** `atol` = {problem.atol:g}, `rtol` = {problem.rtol:g}.",
        f"* **Points:** {spec.points_correct:g} for a correct `ModelNew`, up to {spec.points_perf:g} more by its "
        f"speed-up over `torch.compile(Model)`: none below {problem.floor:g}x, all at {problem.target:g}x"
        f"{provisional}.",
    ])


def _cells(spec: ModelSpec, problem: ModelProblem, solution_source) -> list[nbformat.NotebookNode]:
    args = f"{TRACK!r}, {problem.id!r}, ModelNew"
    source = solution_source(problem.reference.read_text())
    assert len(source) < MAX_SOURCE_CHARS, problem.id
    return [nb.solution(source, problem.id),
            nb.check_cell(f"check({args})", f"{problem.id}_check", problem.id),
            nb.graded_test(f"assert_runs({args})", f"score_model({args})", f"{problem.id}_score",
                           spec.max_points, "correctness and speed-up, on the GPU worker")]


def build() -> nbformat.NotebookNode:
    spec = load_model_spec(TRACK)
    solution_source = _kernelbench_notebook().solution_source
    cells = [nb.markdown(INTRO.format(count=len(spec.problems), trials=spec.trials, runs=spec.timed_runs,
                                      correct=spec.points_correct, perf=spec.points_perf, check_trials=CHECK_TRIALS)),
             nb.locked(SETUP, "setup")]
    for number, problem in enumerate(spec.problems.values(), start=1):
        cells.append(nb.markdown(_statement(number, spec, problem)))
        cells += _cells(spec, problem, solution_source)
    return nb.notebook(cells, language=nb.MODEL_LANGUAGE)
