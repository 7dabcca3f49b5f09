"""The capstone's nbgrader source notebook: its introduction (the leaderboard each problem's best kernels are ranked
on, `gradebook.leaderboard`) and titles; the cells are the model engine's (`graders.model_engine.notebook`, as for
the kernelbench track)."""
from __future__ import annotations

import nbformat

from graders.model_engine import notebook

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
output checked afterwards; the eager `Model` and `torch.compile(Model)` are timed the same way by the grader on
its own, once for the whole class. **Points**: {correct:g} for a correct model, up to {perf:g} more by its
speed-up over `torch.compile`, none below each problem's floor, all at its target.

**The leaderboard.** Each problem's correct submissions are ranked by their speed-up over `torch.compile`, beside
the machine's rows: PyTorch eager and `torch.compile` (timed by the grader once for the class), the vendor
library's kernel where there is one (PyTorch's `scaled_dot_product_attention` for the attention) and kernels an
AI model wrote for these problems, graded as yours are. The public page names you by a pseudonym; your own page
(its link comes from your TA) marks your rows and, where your submission is not ranked, says why.

* Run the **check** cell under each model: it runs {check_trials} trials on public inputs at the problem's small
  sizes, on the GPU where there is one, else on this machine's CPU with Triton kernels in Triton's interpreter
  (`TRITON_INTERPRET=1`), and says ✓, ✗ (with the first wrong value) or ? (it could not finish). A ✗ also fails
  `nbgrader validate`. The check is not the grade: correctness at the problem's sizes and speed are judged on
  the GPU worker."""


def build() -> nbformat.NotebookNode:
    return notebook.build(TRACK, INTRO, TITLES, lambda problem: "The reference")
