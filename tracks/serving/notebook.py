"""The serving track's nbgrader source notebook (W4), built from spec.toml, problem.py and the reference kernels.

An introduction, the set-up cell, then per kernel in spec order: a markdown statement (its title, what the
reference does and its hypothesis from the reference's leading comment, the kind's data and signature the first time
the kind appears, launch, sizes, speed and points), the solution cell (``<id>_src``: the reference with its kernel
body between nbgrader's solution markers), a read-only ``<id>_check`` cell (compiles; the CPU preview) and the
hidden ``<id>_score`` cell. Then prefill against decode: how to measure it, and the questions (problem.py's
``QUESTIONS``, key.py), each a statement, a numeric question's cell of the student's numbers, a solution cell and a
graded cell whose hidden test is `graders.quiz_engine.grade.grade_answer`.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders import tracks
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.quiz_engine.grade import right_answer
from graders.quiz_engine.notebook import answer_literal, form
from graders.quiz_engine.questions import REFERENCE_STUDENT, Numeric, Question
from graders.targets_gpu import targets_note

TRACK = "serving"
TITLES = {"rmsnorm": "RMSNorm fused with the residual add", "swiglu": "SwiGLU fused",
          "paged_decode": "Paged decode attention", "w4a16_b1": "W4A16 GEMV at batch 1",
          "w4a16_b16": "W4A16 at batch 16: one decode step of 16 sequences",
          "fp8_gemm": "FP8 GEMM with per-tensor scales"}

INTRO = """# Serving kernels

The kernels a served LLM spends its decode steps in, from the course's chapter *Kernels for Inference*: operator
fusion (RMSNorm with the residual add, SwiGLU), attention over a **paged** KV cache, a weight-only int4 GEMV, and an
FP8 GEMM with per-tensor scales.
Prefill (a prompt's thousands of tokens at once) is GEMMs, compute-bound; a decode step (one new token a sequence)
reads every weight and the whole KV cache to do about two FLOPs a byte, so it is **memory-bound**, and so are the
elementwise kernels between the GEMMs. Every step but the last is therefore judged by its bytes: what it must move,
against the time it takes; the FP8 GEMM, the prefill side, by its FLOPs.

Each kernel is CUDA C++ in the string of its cell; the grader compiles it with NVRTC and launches it itself, with the
grid and block each step states (`BLOCK_X`, `BLOCK_Y`, `TILE_X`, `TILE_Y` are `#define`d for you). NVRTC has no
`cuda_bf16.h` or `cuda_fp16.h` here: a bf16 or fp16 value arrives as its 16 raw bits, an `unsigned short`
(`__uint_as_float((unsigned)b << 16)` is a bf16's exact value; the steps show fp16 and rounding to bf16 with one PTX
instruction each). Your submission is kernel source only: it runs in a separate process that compiles the string, so
it cannot call torch or any host code.

**Correct** means: on fresh random inputs at several shapes, within each step's tolerance of a float64 (or fp32)
reference of the same inputs, before and after timing; outputs are NaN before every run and fenced by guard bands,
inputs fenced by NaN. **Speed** is the ratio of the step's baseline time to your kernel's at its timed shape, both
measured in the same process on the grading GPU; the feedback also gives your kernel's throughput (for the
memory-bound steps, bytes per second against the GPU's memory bandwidth: their roofline). Points: 1 for a correct
kernel, the rest for speed, none below the floor
ratio, full at the target, linear between. A kernel that is wrong, writes outside its output, crashes or hangs
scores 0 for that kernel.

""" + nb.CUDA_CHECK_CELL

PREFILL_DECODE = """## Prefill against decode: one layer, two regimes

The same linear layer, `y = x @ W^T` with W N x K in bf16, runs in both phases of serving: **prefill** pushes a
prompt's T tokens through it at once (T in the thousands: a GEMM), **decode** one new token a sequence (T = 1, or the
batch size: a GEMV). Its FLOPs grow with T (2 T N K) while its bytes hardly do (W's 2 N K dominate until T is in the
thousands), so its arithmetic intensity is about T FLOP per byte: decode sits far left of any GPU's ridge point and is
bound by the weights' bytes, prefill far right and bound by the tensor cores. Measure it on a GPU of your own, for
your layer (its K and N below):

```python
import torch
K, N = 4096, 14336                       # your layer's
w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
for t in (1, 16, 256, 4096):
    x = torch.randn(t, K, device="cuda", dtype=torch.bfloat16)
    for _ in range(3): x @ w.T
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); [x @ w.T for _ in range(20)]; end.record(); end.synchronize()
    s = start.elapsed_time(end) / 20 / 1e3
    print(f"T={t:5}: {s * 1e6:8.1f} us, {2 * t * N * K / s / 1e12:7.1f} TFLOP/s, {2 * N * K / s / 1e12:5.2f} TB/s of W")
```

Expect the time to hardly move from T = 1 to T = 16 (the weights' bytes bound it), then to grow with T once the
layer crosses the ridge point. The questions below ask for the numbers that say so, for your own layer and GPU: each
is a literal
in its cell, graded against the key (numeric answers within the tolerance stated).
"""

# What public FP8 GEMMs on Hopper measured, per step that has them (this track's own numbers are not measured yet)
PUBLISHED = {
    "fp8_gemm": "an H100's or H200's dense fp8 peak is 1,979 TFLOP/s (datasheet); torch._scaled_mm ran at 1,202 "
                "TFLOP/s at 4096^3 on the H200 (this course's issue), and the step's goal is 70% of it; DeepGEMM, "
                "DeepSeek's fp8 GEMM (wgmma, TMA, warp specialisation, promotion into fp32 every 128 products), "
                "reported 1,350+ TFLOP/s on an H800 (an H100 with less NVLink) at its release, 1,550 later.",
}

# what each kind computes and takes, said once, before its first step
KINDS = {
    "rmsnorm_residual": """\
**The fused residual add and RMSNorm** (vLLM's `fused_add_rms_norm`). Between two layers a transformer
adds the layer's output to the residual stream and normalises the sum: `h = x + residual`, then
`y = h / sqrt(mean(h^2) + 1e-6) * weight` over each row. `x`, `residual` (rows x cols) and `weight` (cols) are bf16;
`out` holds two bf16 matrices, `h` (rows x cols, the next layer's residual) and then `y`. cols is a multiple of 8, so
a row is whole 16-byte vectors. Correct: each bf16 value within {rtol:g} x |expected| + {atol:g} of the float64
result: one bf16 rounding of the output, one more if you normalise the rounded `h`, with a factor 2 to spare. Some
rows are 30 times the others: square and sum in fp32.""",
    "swiglu": """\
**SwiGLU** (vLLM's `silu_and_mul`). The gated MLP's activation: `x` (tokens x 2d, bf16) holds the gate projection
in its first d columns and the up projection in its last d, and `out` (tokens x d, bf16) is
`silu(gate) * up = gate / (1 + exp(-gate)) * up`. Correct: within {rtol:g} x |expected| + {atol:g} of the float64
result. Some rows are 100 times the others, so gates reach ±300: `exp(g) / (1 + exp(g))` is inf / inf there.""",
    "paged_decode": """\
**Paged decode attention.** A serving engine does not give each sequence one contiguous KV cache: it cuts the
cache into **pages** of `page_size` tokens and keeps, per sequence, a **block table** of the pages it owns, so memory
is taken a page at a time as a sequence grows and nothing is reserved for tokens that may never come (vLLM's
PagedAttention). `k_cache` and `v_cache` are num_pages x page_size x kv_heads x head_dim bf16 (vLLM's and
FlashInfer's NHD layout); token `t` of sequence `b` is in page `block_table[b * max_pages + t / page_size]`, slot
`t % page_size`; `seq_lens[b]` is its length. A decode step has one query token a sequence: `q` is batch x q_heads x
head_dim bf16, and `out` (batch x q_heads x 1 x head_dim, **fp32**) is `softmax(q K^T / sqrt(head_dim)) V` over the
sequence's tokens. Query head `h` reads KV head `h / (q_heads / kv_heads)` (grouped-query attention: at most 8 query
heads a KV head here). The sequences of a batch have mixed lengths (1 to max_len, one ending exactly on a page
boundary); their pages are scattered through a larger pool; every slot no sequence owns is NaN. Correct: the
attention track's rule, per (sequence, head) your largest error at most 2x that of PyTorch computing the same
attention in bf16, plus 1e-5; the last query head's `q` is scaled by 50. The baseline is what serves without a
paged kernel: the pages gathered into a padded contiguous cache, then PyTorch's `scaled_dot_product_attention` with
a length mask (FlashInfer's paged decode, the better baseline, is not installed on the grading image).""",
    "w4a16_gemv": """\
**W4A16: int4 weights, fp16 activations.** Weight-only quantization stores each weight in 4 bits and keeps the
activations in fp16: `y = x @ W^T`, `x` batch x K fp16, W N x K as codes q in 0..15, two a byte (`w`, N x K/2 bytes,
the even k in the **low** nibble), `W[n][k] = (q - 8) * scales[n][k / 128]` with one fp16 scale per 128 values of a
row (`scales`, N x K/128), `y` batch x N fp32. K is a multiple of 128. Correct as the NVFP4 GEMV: each `y` within
{rtol:g} x (the sum over k of |W[n][k] x[b][k]|) of the float64 product; the decoded weights and x are exact in
fp32, so that is fp32 accumulation's error, in any order: accumulate in fp32, not fp16.""",
    "fp8_scaled_gemm": """\
**FP8 GEMM with per-tensor scales.** An fp8 checkpoint stores each weight matrix in e4m3 (4 significant bits, at
most 448) with one fp32 scale for the whole tensor, and the activations are quantised the same way:
`C = scale_a * scale_b * (A @ B)`, `A` M x K e4m3 row-major, `B` K x N e4m3 **column-major** (`B[k][n]` at
`B[n * K + k]`, the layout cuBLASLt's fp8 GEMM takes, and both operands K-major, the layout fp8 `wgmma` reads),
`fp8` = `unsigned char` (the raw bits), `scale_a` and `scale_b` one fp32 value each (device pointers), `C` M x N
fp32. Correct: every element within |scale_a scale_b| (4 K + 4) 2^-24 (|A| @ |B|) of the float64 result (the
tensor-core track's fp8 bound) and a relative Frobenius error under 2e-4, and the scales applied once. Hopper's fp8
tensor cores add into their accumulator with about 13 bits of mantissa: a `wgmma` chain over all of K is too coarse
for this tolerance (3e-4 to 8e-4 at these shapes), so add its partial sums into fp32 registers every few `wgmma`s,
as cuBLASLt does every 128 products (1.3e-4; the reference: every 64, 7.6e-5). Your kernel must run on the tensor
cores (its SASS is read); `wgmma` and TMA are not required: an `mma.sync` kernel that walks the persistent grid's
tiles is graded too. Speed is the ratio of `torch._scaled_mm`'s time with the same scales (cuBLASLt, without fast accumulation) to
yours, in FLOP/s.""",
}


def _work(kind, shape) -> str:
    work = kind.work(shape)
    return f"{work / 1e9:,.0f} GFLOP" if kind.work_unit == "FLOP" else f"{work / 1e6:,.0f} MB moved at the least"


def _statement(n: int, kernel: KernelSpec, spec: AssignmentSpec, first: bool) -> str:
    """The step's markdown: its title, what the reference does and its hypothesis, the kind on its first step, then
    launch, sizes and speed."""
    module = tracks.get(TRACK).problem_module()
    kind = problem(kernel.kind)
    _, _, rest = nb.leading_comment(kernel.reference.read_text()).partition(": ")
    what, _, hypothesis = rest.partition(" Hypothesis: ")
    hypothesis, _, launch = hypothesis.partition(" The launch: ")
    provisional = targets_note(spec.targets, spec.measured_in)
    rtol = module.GEMV_RTOL if kernel.kind == "w4a16_gemv" else module.FUSED_RTOL
    lines = [f"## {n}. {TITLES[kernel.id]}", ""]
    if first:
        lines += [KINDS[kernel.kind].replace("{rtol:g}", f"{rtol:g}").replace("{atol:g}", f"{module.FUSED_ATOL:g}"), "",
                  f"    extern \"C\" __global__ void {kernel.function}{kind.signature}", ""]
    lines += [what[:1].upper() + what[1:], "", f"**Hypothesis:** {hypothesis}", "",
              f"* **Launch:** {launch[:1].upper() + launch[1:]}",
              *([_tensor_maps(kernel)] if kernel.launch.tensor_maps else []),
              "* **Sizes** (" + ", ".join(kind.shape_names) + "): checked at "
              + "; ".join(" x ".join(map(str, s)) for s in kernel.check_shapes) + "; timed at "
              + " x ".join(map(str, kernel.perf_shape)) + f" ({_work(kind, kernel.perf_shape)}).",
              f"* **Speed:** against {kind.baseline_name}; full marks at {kernel.target:g}x, none below "
              f"{kernel.floor:g}x{provisional}; {kernel.points_correct:g} point for a correct kernel, up to "
              f"{kernel.points_perf:g} for speed.",
              *([f"* **Public numbers:** {PUBLISHED[kernel.id]} This track's own number is not measured yet: its "
                 "reference has not run on a GPU."] if kernel.id in PUBLISHED else [])]
    return "\n".join(lines)


def _tensor_maps(kernel: KernelSpec) -> str:
    """The kernel's parameters after the sizes: the tensor maps the grader encodes over its operands."""
    defines = kernel.geometry.defines()
    maps = [f"`{m.operand}`'s, a box of " + " x ".join(str(defines.get(b, b)) for b in m.box)
            + f" values (innermost first: {', '.join(map(str, m.box))}), swizzle {m.swizzle}"
            for m in kernel.launch.tensor_maps]
    return ("* **Tensor maps** (parameters after `K`, in this order, each `const __grid_constant__ CUtensorMap`; the "
            f"grader encodes them over the tensors as it allocated them): {'; '.join(maps)}.")


def _question(q: Question) -> list[nbformat.NotebookNode]:
    """A question's statement, the cell that prints a numeric question's numbers, its solution cell (``<id> = None``;
    the reference's answer between the solution markers, between two string statements, so that the release's C++
    stub comment leaves the cell valid Python) and its graded cell."""
    options = "".join(f"\n- **{k}**: {option}" for k, option in getattr(q, "options", {}).items())
    answer = answer_literal(right_answer(TRACK, q, REFERENCE_STUDENT))
    plural = "" if q.points == 1 else "s"
    cells = [nb.markdown(f"**{q.id}** ({q.points:g} point{plural}). {q.text}\n{options}\n\n*Answer: {form(q)}.*")]
    if isinstance(q, Numeric):
        cells.append(nb.locked(f"show_numbers({TRACK!r}, {q.id!r})", f"{q.id}_numbers"))
    return cells + [
        nb.solution(f'{q.id} = None\n"""\n### BEGIN SOLUTION\n"""\n{q.id} = {answer}\n"""\n'
                    '### END SOLUTION\n"""', q.id),
        nb.graded_test(f"check_answer({TRACK!r}, {q.id!r}, {q.id})", f"grade_answer({TRACK!r}, {q.id!r}, {q.id})",
                       f"{q.id}_score", q.points, "your answer, against the key")]


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    cells = [nb.markdown(INTRO),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score\n"
                       "from graders.quiz_engine.grade import check_answer, grade_answer, show_numbers", "setup")]
    seen: set[str] = set()
    for n, kernel in enumerate(spec.kernels.values(), start=1):
        cells.append(nb.markdown(_statement(n, kernel, spec, kernel.kind not in seen)))
        seen.add(kernel.kind)
        cells += nb.cuda_kernel_cells(TRACK, kernel)
    cells.append(nb.markdown(PREFILL_DECODE))
    for q in tracks.get(TRACK).problem_module().QUESTIONS:
        cells += _question(q)
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
