"""The attention track's nbgrader source notebook, built from its spec, structure.toml, its problem kinds and
its reference kernels.

Cells: an introduction, the set-up cell, then per kernel in spec order: a markdown statement (title, the
reference's leading comment, signature, launch, sizes, speed, points, structural checks, counter rule), the
solution cell (``<id>_src``: the reference with its kernel body between nbgrader's solution markers), a
read-only ``<id>_check`` cell (compiles, no GPU needed), the hidden ``<id>_score`` cell and a hidden cell per
structural check of the kernel.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders.cuda_engine.counters import METRICS
from graders.cuda_engine.problems import problem
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.cuda_engine.structure import Check, load_structure
from graders.targets_gpu import targets_note

TRACK = "attention"
TITLES = {"softmax_three_pass": "Softmax in three passes", "softmax_two_pass": "Softmax in two passes (online)",
          "softmax_one_pass": "Softmax in one pass", "flash_forward": "FlashAttention forward",
          "flash_causal": "Causal FlashAttention", "flash_tc": "FlashAttention-2 on the tensor cores",
          "flash_tc_causal": "Causal FlashAttention-2 on the tensor cores",
          "decode": "Decode: one query, a long KV cache"}
# how the grid follows from the shape, by problem kind
GRIDS = {"row_softmax": "one block per row",
         "attention_forward": "ceil(seq_q / TILE_Y) x (batch * heads) blocks: blockIdx.x picks TILE_Y query rows, "
                              "blockIdx.y the (batch, head)",
         "attention_decode": "batch * heads blocks, one per (batch, head)"}
for _kind in ("attention_forward_causal", "attention_forward_tc", "attention_forward_causal_tc"):
    GRIDS[_kind] = GRIDS["attention_forward"]

INTRO = """# Attention, from the softmax up

{count} CUDA C++ kernels: a row softmax three ways (three passes over the logits, two with the online max
and sum, one with the row held in registers), FlashAttention's forward pass (unmasked, then causal, then both
FlashAttention-2 style on the tensor cores) and decode, one new token attending to a long KV cache. Write
each kernel as CUDA C++ in the string of its cell; the grader compiles it with NVRTC and launches it itself,
with the grid and block each step states (`BLOCK_X`, `BLOCK_Y`, `TILE_X`, `TILE_Y` and any other parameter of
the step are `#define`d for you).

**The softmax** is fp32: `out[r][c] = exp(x[r][c] - m) / sum over c' of exp(x[r][c'] - m)` with `m` the row's
max. Correct means within a relative 2e-5 of a float64 softmax at every element. Some hidden rows have logits
in the hundreds (`expf` overflows above 88.7) or all hundreds below zero: subtract the max. Speed is the ratio
of a device-to-device copy of the same bytes to your kernel: reading the logits once and writing the
probabilities once is all a softmax has to do, so 0.9 means 90% of the bandwidth a copy reaches.

**Attention** takes `Q`, `K`, `V` in bf16, shaped (batch, heads, seq, head_dim) and contiguous, and writes
`O = softmax(Q K^T / sqrt(head_dim)) V` in **fp32**, (batch, heads, seq_q, head_dim). NVRTC has no
`cuda_bf16.h` here, so each bf16 arrives as its 16 raw bits, an `unsigned short`:
`__uint_as_float((unsigned)x << 16)` is its exact value. head_dim is 64 or 128; sequence lengths include
97 and 1025, and seq_q differs from seq_k in some cases. **Correct** is the rule FlashAttention's own tests
use: in every (batch, head), your largest error against an fp32 reference is at most 2x the largest error of
PyTorch computing the same attention in bf16 (plus 1e-5). The last head's `Q` is scaled by 50, so its scores
reach the hundreds. **Causal** is PyTorch's `is_causal=True`, aligned to the upper left: query `i` sees keys
`j <= i`, also when seq_q and seq_k differ. Speed is the ratio of
`torch.nn.functional.scaled_dot_product_attention`'s time, with its flash backend, to yours, both measured
in the same process on the grading GPU.

Outputs are filled with NaN before every run and fenced by guard bands, inputs sit between NaN guards:
an element you never write, a write outside `out` or a read outside the inputs fails. Each kernel earns
points for being correct and more for speed: none below its floor ratio, full at its target, linear between.

""" + nb.CUDA_CHECK_CELL

SETUP = ("from graders.cuda_engine.grade import assert_compiles, check, score\n"
         "from graders.cuda_engine.structure import check_sass")


def _shape(shape: tuple[int, ...]) -> str:
    return " x ".join(f"{n:,}" for n in shape)


def _statement(number: int, kernel: KernelSpec, spec: AssignmentSpec, checks: list[Check]) -> str:
    kind = problem(kernel.kind)
    g = kernel.geometry
    params = "".join(f", `{name}` = {value}" for name, value in g.params)
    work = kind.work(kernel.perf_shape)
    amount = f"{work / 2**30:,.1f} GiB moved" if kind.work_unit == "B" else f"{work / 1e12:,.2f} TFLOP"
    return "\n".join([
        f"## {number}. {TITLES[kernel.id]}", "",
        nb.leading_comment(kernel.reference.read_text()), "",
        f"* **Signature:** `extern \"C\" __global__ void {kernel.function}{kind.signature}`",
        f"* **Launch:** {GRIDS[kernel.kind]}, of {g.block[0]} x {g.block[1]} threads (`TILE_X` = {g.tile[0]}, "
        f"`TILE_Y` = {g.tile[1]}{params}).",
        f"* **Shapes checked** ({', '.join(kind.shape_names)}): "
        + "; ".join(_shape(s) for s in kernel.check_shapes) + ".",
        f"* **Speed:** timed at {_shape(kernel.perf_shape)} ({amount} per launch); baseline: {kind.baseline_name}.",
        f"* **Points:** {kernel.points_correct:g} for a correct kernel, up to {kernel.points_perf:g} more for "
        f"speed: full at {kernel.target:g} of the baseline's speed, none below {kernel.floor:g}"
        + targets_note(spec.targets, spec.measured_in) + ".",
        *(f"* **Structure** ({c.points:g} point{'' if c.points == 1 else 's'}, from the compiled code): "
          + "; ".join(REQUIREMENTS[r][1] for r in c.require) + "." for c in checks),
        *([f"* **Compiled code:** {'; '.join(REQUIREMENTS[r][1] for r in kind.sass_requirements)}. A kernel "
           "that misses one keeps its correctness points only."] if kind.sass_requirements else []),
        *([f"* **Work skipped:** Nsight Compute counts its {METRICS[kernel.counter.metric][1]} in one launch at "
           f"the speed shape; the speed points need at most {kernel.counter.at_most:g} x the count of the reference "
           f"of step {list(spec.kernels).index(kernel.counter.relative_to) + 1}, the unmasked kernel. Skip the "
           "tiles the mask hides from every row of the block: that halves the work, where computing them and "
           "masking afterwards counts 1 x."] if kernel.counter else []),
    ])


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    structure = load_structure(TRACK)
    cells = [nb.markdown(INTRO.format(count=len(spec.kernels))), nb.locked(SETUP, "setup")]
    for number, kernel in enumerate(spec.kernels.values(), start=1):
        checks = [c for c in structure.checks.values() if c.kernel == kernel.id]
        cells.append(nb.markdown(_statement(number, kernel, spec, checks)))
        cells += nb.cuda_kernel_cells(TRACK, kernel)
        for check in checks:
            cells.append(nb.graded_test(nb.assert_compiles(TRACK, kernel.id), f"check_sass({TRACK!r}, "
                                        f"{check.id!r}, {kernel.id}_src)", check.id, check.points, "structure"))
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
