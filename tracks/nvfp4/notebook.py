"""The NVFP4 GEMV journey's nbgrader source notebook (W5), built from spec.toml, the reference kernels, problem.py
(the kind and the Blackwell questions) and key.py (their answers).

Per kernel (in spec order): a markdown cell (the step and its hypothesis, from the reference's leading comment; the
launch, the sizes, the speed curve, what its SASS must show), the solution cell (``<id>_src``: the reference with its
kernel body between nbgrader's solution markers; the helper functions above the kernel stay in the stub), a
read-only ``<id>_check`` cell (compiles; the CPU preview where the kernel is one it can run) and the hidden
``<id>_score`` cell. Then the Blackwell part: what tcgen05, Tensor Memory and CTA pairs add, and its reading
questions, each a solution cell and a graded cell whose hidden test is `graders.quiz_engine.grade.grade_answer`.

The notebook's language is `graders.notebook.CUDA_LANGUAGE` (the release's stub is a C++ comment), so a question's
solution region sits between two Python string statements: released, the comment is inside a string and the cell
still runs (``<id> = None`` is the answer until the student writes one below it).
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders import tracks
from graders.cuda_engine.problems import problem
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.quiz_engine.grade import right_answer
from graders.quiz_engine.notebook import answer_literal, form
from graders.quiz_engine.questions import REFERENCE_STUDENT, Question
from graders.targets_gpu import targets_note

TRACK = "nvfp4"

INTRO = """# The NVFP4 GEMV journey

NVFP4 is Blackwell's four-bit floating-point format, and it never works alone: it is a **microscaling** format (the
course's chapter *NVFP4 & microscaling formats*). Each weight is an **e2m1** code (1 sign, 2 exponent, 1 mantissa
bit: the sixteen values 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6), every **16 consecutive values** of a row share one
**e4m3** scale (an fp8 number: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, at most 448), and the whole
tensor has one **fp32** scale that moves the block scales into e4m3's range:

    W[m][k] = tensor_scale * e2m1(code of W[m][k]) * e4m3(scale of block k / 16 of row m)

That is 4.5 bits a weight (4 for the code, 8 / 16 for its share of the block scale). MXFP4, the OCP format, uses
blocks of 32 and power-of-two (e8m0) scales; NVFP4's smaller blocks and finer scales follow the data more closely.

The chapter's worklog is a batched GEMV on a B200 (a hackathon problem: an NVFP4 matrix times an NVFP4 vector, fp16
out) written in CUDA from scratch, from **2000 µs to 22.3 µs: 90x**, and almost none of it from the tensor cores. A
GEMV reads every weight once and does two FLOPs with it, so it is **memory-bound**: the wins come from moving the
bytes well (coalesced, vectorised loads), decoding them cheaply (a lookup and bit tricks instead of arithmetic on
each field), keeping every SM busy (a warp per row, shuffle reductions, split-K) and reading the activations once.

Blackwell's FP4 tensor cores are not on the H200 that grades this track, but none of those wins needs them: the
H200 can decode NVFP4 in registers and run the whole journey against its HBM roofline. Here each step is a kernel
on the H200's CUDA cores, graded for correctness and as a fraction of that roofline; the last part of the notebook
is what Blackwell adds (tcgen05, Tensor Memory, CTA pairs), which **the H200 cannot run**, so it is graded as
reading questions.

**The problem.** `y = W @ x`, W an M x K matrix in NVFP4, x (K values) and y (M values) in fp32, K a multiple of 64.
Every kernel has the signature

    extern "C" __global__ void NAME{signature}

- `w`: M x K/2 bytes, row-major, two codes a byte, the even k in the low nibble;
- `scales`: M x K/16 bytes, row-major, the e4m3 block scales as their bits;
- `tensor_scale`: one fp32 value; `x`: K fp32 values; `y`: M fp32 values, which you write.

The grader compiles each cell with NVRTC and launches it itself: TILE_X / 256 x ceil(M / TILE_Y) blocks of BLOCK_X
threads, TILE_Y rows a block and TILE_X / 256 blocks sharing each row's K (4 in the cluster and registers steps, 2 in
the stream step, 1 before them).
These names are `#define`d before your code; each step states its values. NVRTC here has no `cuda_fp8.h` or
`cuda_fp4.h`: decode the bits yourself (the steps show how).

**Correct** means: on fresh random inputs at several shapes (one row, K = 64, K not a multiple of 1024 or 2048, M not a
multiple of any tile), each `y[m]` within {rtol:g} x (the sum over k of |W[m][k] x[k]|) of the float64 product of the
dequantised W. The decoded weights are exact (an e2m1 value times an e4m3 scale has at most 6 significant bits), so
this tolerance is fp32 accumulation's, in any order, with room to spare; a decode that drops a sign or reads the
wrong scale is off by a large part of it. `y` is filled with NaN before every run and fenced by guard bands; it is
checked again after timing.

**Speed** is the ratio of the time of the {baseline} to your kernel's at M = {m}, K = {k} ({mb:.1f} MB of weights and
scales), both measured in the same process on the grading GPU: 0.9 means 90% of the bandwidth a copy reaches. The
feedback charts every step against it, the first step to the last: the journey's 90x, measured on the H200. Points:
1 for a correct kernel, the rest for speed, none below the floor ratio, full at the target, linear between; a
kernel that misses its step's SASS requirement keeps its correctness point only. A kernel that is wrong, writes
outside y, crashes or hangs scores 0 for that kernel. A kernel may keep no intermediate in global memory (more than
1 MiB of `__device__` variables, or a device-side malloc, earns the correctness point only).

Your submission is kernel source only: it runs in a separate process that compiles the string, so it cannot call
torch or any host code.

""" + nb.CUDA_CHECK_CELL + """
* Each question of the Blackwell part is answered with a letter (`"b"`) in its cell, read from the file you hand in."""

BLACKWELL = """## What Blackwell adds (read, not run)

**The H200 (sm_90) cannot run anything in this part**: `tcgen05`, Tensor Memory and CTA pairs are sm_100
(Blackwell) features. Nothing here is compiled or timed; it is graded as reading questions, from the chapter and the
PTX ISA's `tcgen05` chapter.

- **tcgen05.mma.** Hopper's `wgmma` is issued by a warpgroup of 128 threads and leaves its accumulators in their
  registers (the Hopper track: 64 floats a thread for a 64 x 128 tile). Blackwell's fifth-generation tensor cores
  take `tcgen05.mma`, issued by **one thread** for the whole CTA, with A in shared memory (or Tensor Memory), B in
  shared memory, and the accumulator in **Tensor Memory**. Block-scaled kinds (`.kind::mxf4nvf4 .block_scale`:
  NVFP4 with its e4m3 scales, MXFP4 with e8m0 ones) apply the block scales inside the MMA, reading the scale
  factors from Tensor Memory.
- **Tensor Memory (TMEM).** 256 KB per SM, a grid of 128 lanes x 512 columns of 32-bit cells, beside the register
  file and shared memory. A kernel allocates columns with `tcgen05.alloc` (from one warp, a power of two, at least
  32) and frees them with `tcgen05.dealloc`; `tcgen05.cp` copies shared memory into it (the scale factors);
  `tcgen05.ld` brings accumulators into registers for the epilogue, each warp of a warpgroup reaching the 32 lanes
  its index gives it. The registers that held wgmma's accumulators are free for the epilogue and the producer.
- **CTA pairs.** With `cta_group::2` one `tcgen05.mma` runs across the two CTAs of a cluster pair on two SMs: each
  holds half of A and half of the accumulator and loads half of B, so a 256-row tile is one instruction and each SM
  loads half of the operands it would need alone.

For this track's GEMV none of them changes the roof: at 2 FLOPs per 4.5 bits of weights it is memory-bound on
either GPU; the chapter's 90x came from the bytes, as here. They matter for the NVFP4 **GEMM**, where the tensor
cores are the limit.
"""


# What a step's reference reached where it was timed, and what is still open (after its launch and SASS lines)
MEASURED = {
    "stream": (
        "**Measured:** this kernel at this launch, timed twice on an H100 at 4096 x 32768, reached 1826 and 1821 "
        "GB/s: **0.713 and 0.712 of the device-to-device copy**, against 0.644 for the best earlier candidate (the "
        "same streaming with the registers step's decode) and 0.30 for the registers step "
        "(`benchmarks/results/nvfp4/nvfp4-sweep-20261208-0037.md`; timed as a candidate, not yet graded through "
        "nbgrader). The issue's goal of 0.85 of the roofline is **not reached yet**, and what holds this kernel "
        "at 0.71 has not been profiled."),
}


def _sizes(kernel: KernelSpec) -> str:
    return ("**Sizes:** K a multiple of 64; checked at M x K = "
            + ", ".join(" x ".join(map(str, s)) for s in kernel.check_shapes) + ".")


def _statement(n: int, kernel: KernelSpec, spec: AssignmentSpec) -> str:
    """The step's markdown: title, what it does and its hypothesis from the reference's leading comment, then the
    launch, sizes, speed and the SASS it must show."""
    title, _, rest = nb.leading_comment(kernel.reference.read_text()).partition(": ")
    what, _, hypothesis = rest.partition(" Hypothesis: ")
    hypothesis, _, _ = hypothesis.partition(" The launch")
    g = kernel.geometry
    splits = g.tile[0] // 256
    share = f", {splits} blocks (a cluster of {kernel.launch.cluster[0]}) sharing each row's K" if splits > 1 else ""
    arch = f", compiled for {kernel.launch.arch}" if kernel.launch.arch else ""
    provisional = targets_note(spec.targets, spec.measured_in)
    must = [REQUIREMENTS[r][1] for r in (*problem(kernel.kind).sass_requirements, *kernel.sass_requirements)]
    return "\n".join([
        f"## {n}. {title[:1].upper() + title[1:]}", "", what[:1].upper() + what[1:], "",
        f"**Hypothesis:** {hypothesis}", "",
        f"* **Launch:** {g.block[0]} threads a block (`BLOCK_X`), {g.tile[1]} row{'s' if g.tile[1] > 1 else ''} a "
        f"block (`TILE_Y`), `TILE_X` = {g.tile[0]}{share}{arch}.",
        "* " + _sizes(kernel),
        f"* **Speed:** full marks at {kernel.target:g} of the roofline, none below {kernel.floor:g}{provisional}; "
        f"{kernel.points_correct:g} point for a correct kernel, up to {kernel.points_perf:g} for speed.",
        f"* **SASS:** {'; '.join(must)}; else the correctness point only.",
        *(["", MEASURED[kernel.id]] if kernel.id in MEASURED else [])])


def _question(q: Question) -> list[nbformat.NotebookNode]:
    """A question's statement, its solution cell (``<id> = None``; the reference's answer between the solution
    markers, between two string statements) and its graded cell."""
    options = "\n".join(f"- **{k}**: {option}" for k, option in q.options.items())
    answer = answer_literal(right_answer(TRACK, q, REFERENCE_STUDENT))
    plural = "" if q.points == 1 else "s"
    text = f"**{q.id}** ({q.points:g} point{plural}). {q.text}\n\n{options}\n\n*Answer: {form(q)}.*"
    return [nb.markdown(text),
            nb.solution(f'{q.id} = None\n"""\n### BEGIN SOLUTION\n"""\n{q.id} = {answer}\n"""\n### END SOLUTION\n"""',
                        q.id),
            nb.graded_test(f"check_answer({TRACK!r}, {q.id!r}, {q.id})",
                           f"grade_answer({TRACK!r}, {q.id!r}, {q.id})", f"{q.id}_score", q.points,
                           "your answer, against the key")]


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    module = tracks.get(TRACK).problem_module()
    kind = problem(next(iter(spec.kernels.values())).kind)
    m, k = next(iter(spec.kernels.values())).perf_shape
    cells = [nb.markdown(INTRO.format(signature=kind.signature, baseline=kind.baseline_name, rtol=module.RTOL, m=m,
                                      k=k, mb=(m * k // 2 + m * k // 16) / 1e6)),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score\n"
                       "from graders.quiz_engine.grade import check_answer, grade_answer", "setup")]
    for n, kernel in enumerate(spec.kernels.values(), start=1):
        cells.append(nb.markdown(_statement(n, kernel, spec)))
        cells += nb.cuda_kernel_cells(TRACK, kernel)
    cells.append(nb.markdown(BLACKWELL))
    for q in module.QUESTIONS:
        cells += _question(q)
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
