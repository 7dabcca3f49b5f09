"""The tensor-core worklog's nbgrader source notebook, built from spec.toml, structure.toml and the reference
kernels.

Per kernel (in spec order): a markdown cell (the step and its hypothesis, from the reference's leading
comment; the launch, the sizes, the speed curve, the structural checks and the counter rule), the solution
cell (``<id>_src``: the reference with its kernel body between nbgrader's solution markers; the PTX helper
functions above the kernel stay in the stub), a read-only ``<id>_check`` cell (compiles, no GPU needed), the
hidden ``<id>_score`` cell, and a hidden ``<id>_sass`` cell where structure.toml has one.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders.cuda_engine.counters import METRICS
from graders.cuda_engine.problems import problem
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.cuda_engine.structure import load_structure
from graders.targets_gpu import targets_note

TRACK = "tensorcores"

INTRO = """# The tensor-core worklog

Six bf16 matrix-multiply kernels on the tensor cores, from WMMA to a pipelined `mma.sync` kernel, then the
last one in fp16, in TF32 and in fp8 (the precision menu), graded as a fraction of cuBLAS in the same
precision. `C = A @ B` with `A` M x K and `B` K x N in bfloat16 (fp16, fp32, e4m3 in the menu), both
row-major (the fp8 step's `B` column-major), and `C` M x N in fp32, row-major, accumulated in fp32. Every bf16
kernel has the signature

    extern "C" __global__ void NAME{signature}

where `bf16` is `unsigned short`: the raw bits of a bfloat16 (`f16` in the fp16 step, `fp8` = `unsigned char`
in the fp8 step; each cell declares it;
the grader's NVRTC has no `cuda_bf16.h` or `mma.h`, so the tensor-core instructions are written as inline PTX,
and the helper functions above each kernel show how). The grader compiles each cell with NVRTC and launches it
itself: a grid of ceil(N / TILE_X) x ceil(M / TILE_Y) blocks of BLOCK_X x BLOCK_Y threads. These four names
and each step's parameters (`BK`, the K depth of a shared-memory slab; `WM` x `WN`, a warp's tile of C;
`STAGES`, the pipeline's buffers) are `#define`d before your code.

**Correct** means: on fresh random matrices of several shapes, every element of C within 4 K 2^-24 (|A| @ |B|)
of the float64 product of the same inputs, and a relative Frobenius error below 1e-4. Products of two bf16 (or
fp16) values are exact in fp32, so that bound is fp32 accumulation's own (K additions, each off by at most
2^-24, twice that when the tensor cores truncate), with a factor 2 to spare; an fp16 accumulator misses the
Frobenius bound by far. The TF32 step's bound adds TF32's rounding of the inputs (2 x 2^-11 a product) and
allows a relative Frobenius error of 1e-3; the fp8 step's is bf16's (a product of two e4m3 values is exact in
fp32 too). C is filled with NaN before every run and fenced by guard bands, so an element you never write, or
a write outside C, fails. Correctness is checked again after timing.

**Speed** is the ratio of {baseline}'s time to your kernel's at 4096 x 4096 x 4096 (in the menu's steps,
cuBLAS in that step's format), both measured in the same process on the grading GPU: 0.5 means half of
cuBLAS's TFLOP/s. cuBLAS on Hopper uses the warpgroup instructions (wgmma), which `mma.sync` cannot match:
published measurements put `mma.sync`'s ceiling near two thirds of the dense peak. So the grader also times
back-to-back `mma.sync` of your kernel's format on the same GPU and reports your share of that rate beside the
ratio (it does not score); the feedback tabulates each kernel's format, time, TFLOP/s, both shares and its
largest error. Points: 1 for a correct kernel, the rest for speed, none below the floor ratio, full at the
target, linear between. Every kernel must run on the tensor cores: a kernel whose SASS has no tensor-core
instruction keeps its correctness point only. A kernel that is wrong, writes outside C, crashes or hangs
scores 0 for that kernel.

Some steps also have a **structural** check, graded from the compiled code (its SASS, read with
`cuobjdump`, no GPU needed): `ldmatrix` (LDSM) where fragments come from shared memory, `cp.async`
(LDGSTS) where the copies are asynchronous, no register spills, and in the fp8 step e4m3 operands on the
tensor cores (on the H200, whose `mma.sync` has no fp8 path, the SASS shows them converted to fp16 pairs,
F2FP.F16.E4M3, before fp16 HMMA). The swizzling step is graded on a hardware counter too: Nsight Compute's
count of its ldmatrix bank conflicts.

Your submission is kernel source only: it runs in a separate process that compiles the string, so it cannot
call cuBLAS, torch or any host code.

""" + nb.CUDA_CHECK_CELL


def _sizes(kernel: KernelSpec) -> str:
    g = kernel.geometry
    depth = min(k for _, _, k in kernel.check_shapes)
    return (f"**Sizes:** M and N are multiples of {g.tile[1]} (the tile), K of {depth}; checked at "
            + ", ".join(" x ".join(map(str, s)) for s in kernel.check_shapes) + ".")


def _statement(n: int, kernel: KernelSpec, spec: AssignmentSpec, checks: list, first_kind: str) -> str:
    """The step's markdown: title, what it does and its hypothesis from the reference's leading comment, then
    launch, sizes, speed, structure and counter lines from the spec (and the signature, where its kind is not
    the first step's)."""
    title, _, rest = nb.leading_comment(kernel.reference.read_text()).partition(": ")
    what, _, hypothesis = rest.partition(" Hypothesis: ")
    hypothesis, _, after = hypothesis.partition(" The launch")
    g = kernel.geometry
    params = "".join(f", {k} = {v}" for k, v in g.params)
    provisional = targets_note(spec.targets, spec.measured_in)
    lines = [f"## {n}. {title[:1].upper() + title[1:]}", "", what[:1].upper() + what[1:], "",
             f"**Hypothesis:** {hypothesis}", "",
             f"* **Launch:** {g.block[0]} x {g.block[1]} threads per block, a {g.tile[1]} x {g.tile[0]} tile of C "
             f"per block{params}.",
             "* " + _sizes(kernel),
             *([f"* **Signature:** `extern \"C\" __global__ void {kernel.function}{problem(kernel.kind).signature}`, "
                f"timed against {problem(kernel.kind).baseline_name}."] if kernel.kind != first_kind else []),
             f"* **Speed:** full marks at {kernel.target:g} of cuBLAS, none below {kernel.floor:g}{provisional}; "
             f"{kernel.points_correct:g} point for a correct kernel, up to {kernel.points_perf:g} for speed."]
    for check in checks:
        lines.append(f"* **Structure** ({check.points:g} point): " +
                     "; ".join(REQUIREMENTS[r][1] for r in check.require) + ".")
    if kernel.counter:
        rule = kernel.counter
        lines.append(f"* **Counter:** the speed points need its {METRICS[rule.metric][1]} (Nsight Compute, one "
                     f"launch at perf size) at most {rule.at_most:g} x those of the reference of step "
                     f"{list(spec.kernels).index(rule.relative_to) + 1}.")
    return "\n".join(lines)


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    structure = load_structure(TRACK)
    first_kind = next(iter(spec.kernels.values())).kind
    kind = problem(first_kind)
    cells = [nb.markdown(INTRO.format(signature=kind.signature, baseline=kind.baseline_name)),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score\n"
                       "from graders.cuda_engine.structure import check_sass", "setup")]
    for n, (kid, kernel) in enumerate(spec.kernels.items(), start=1):
        checks = [c for c in structure.checks.values() if c.kernel == kid]
        cells.append(nb.markdown(_statement(n, kernel, spec, checks, first_kind)))
        cells += nb.cuda_kernel_cells(TRACK, kernel)
        for check in checks:
            cells.append(nb.graded_test(nb.assert_compiles(TRACK, kid), f"check_sass({TRACK!r}, {check.id!r}, "
                                        f"{kid}_src)", check.id, check.points, "structure"))
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
