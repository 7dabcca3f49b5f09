"""The GEMM worklog's nbgrader source notebook, built from spec.toml, structure.toml and the reference kernels.

Per kernel (in spec order): a markdown cell (the step: the reference's leading comment, the launch, the
sizes it must handle, the speed curve), the solution cell (``<id>_src = r\"\"\"...\"\"\"``: the reference with
its kernel body between nbgrader's solution markers), a read-only ``<id>_check`` cell (compiles, no GPU
needed), the hidden ``<id>_score`` cell, and hidden structural cells (``<id>_sass``, ``autotuned_search``)
where structure.toml has them.
"""
from __future__ import annotations

import json
import re

import nbformat

from graders import notebook as nb
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.cuda_engine.structure import load_structure
from graders.targets_gpu import targets_note

MULTIPLE_NOTE = ("**Sizes:** M is a multiple of {m}, N of {n} and K of 32 (no bounds checks needed; "
                 "every float4 is 16-byte aligned).")
ANY_NOTE = "**Sizes:** any M, N, K, including ones that are not multiples of the tile, and 1 x 1 x 1."

INTRO = """# The GEMM worklog

Ten fp32 matrix-multiply (SGEMM) kernels, each a step up in speed, graded as a fraction of cuBLAS.
Row-major fp32 matrices, `C = A @ B` with `A` M x K, `B` K x N, `C` M x N. Every kernel has the signature

    extern "C" __global__ void NAME(float* C, const float* A, const float* B, int M, int N, int K)

Write each kernel as CUDA C++ in the string of its cell. The grader compiles it with NVRTC and launches it
itself: a grid of ceil(N / TILE_X) x ceil(M / TILE_Y) blocks of BLOCK_X x BLOCK_Y threads. These four names
and each step's parameters (`BK`, the K depth of a shared-memory slab; `WM`, `WN` for warp tiles) are
`#define`d before your code; TM = TILE_Y / BLOCK_Y and TN = TILE_X / BLOCK_X are the rows and columns of
C one thread computes.

**Correct** means: on fresh random matrices of several shapes, every element of C within fp32 rounding of
a float64 reference (|error| <= 1e-3 (|A| @ |B|)) and a relative Frobenius error below 1e-4. C is filled
with NaN before every run and fenced by guard bands, so an element you never write, or a write outside C,
fails. Correctness is checked again after timing.

**Speed** is the ratio of cuBLAS SGEMM's time (`torch.matmul`, TF32 off) to your kernel's at 4096 x 4096 x
4096, both measured in the same process on the grading GPU: 0.5 means half of cuBLAS's GFLOP/s. Points: 1
for a correct kernel, the rest for speed, none below the floor ratio, full at the target, linear between.
A kernel that is wrong, writes outside C, crashes or hangs scores 0 for that kernel.

Some steps also have a **structural** check, graded from the compiled code (its SASS, read with
`cuobjdump`): 128-bit loads where the step is about vectorizing, no register spills where big register
tiles are the point. These need no GPU.

Your submission is kernel source only: it runs in a separate process that compiles the string, so it cannot
call cuBLAS, torch or any host code.

""" + nb.CUDA_CHECK_CELL

TUNE_NOTE = """

The tuner's parameters are BM, BN (the block tile), BK, TM and TN (the thread tile); the grader launches
(BN / TN) x (BM / TM) threads on a BN x BM tile and `#define`s BK. List what you tried in
`autotuned_space` (each name mapped to its values; at least 4 valid combinations: BM and BN dividing 128,
BK dividing 32, TM, TN and BK multiples of 4, 32 to 1024 threads, at most 48 KiB of shared memory) and
put the fastest in `autotuned_choice`. On a machine with a GPU:

    from graders.cuda_engine.structure import autotune
    best, table = autotune('gemm', autotuned_src, autotuned_space)

The hidden tests check the space and the choice, compile every configuration (no spills allowed), and grade
your choice for correctness and speed."""

CONFLICT_NOTE = """

On a GPU with Nsight Compute, `python -m benchmarks.gemm_bench --ncu-only` counts the shared-memory bank
conflicts of the reference kernels 6, 7 and 8 (`l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum`
and `..._st.sum`); the worklog's chart and table record them."""

AUTOTUNE_SPACE = {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16], "TM": [4, 8], "TN": [4, 8]}
AUTOTUNE_CHOICE = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}


def _statement(n: int, kernel: KernelSpec, spec: AssignmentSpec, checks: list, tuned: bool) -> str:
    """The step's markdown: title and prose from the reference's leading comment, then launch, sizes, speed
    and structure lines from the spec."""
    title, _, rest = nb.leading_comment(kernel.reference.read_text()).partition(": ")
    title = re.sub(r"^\d+\.\s*", "", title)
    g = kernel.geometry
    multiples = all(m % g.tile[1] == 0 and n_ % g.tile[0] == 0 and k % 32 == 0 for m, n_, k in kernel.check_shapes)
    if kernel.student_geometry:
        launch = "**Launch:** yours (see below)."
    else:
        params = "".join(f", {k} = {v}" for k, v in g.params)
        launch = (f"**Launch:** {g.block[0]} x {g.block[1]} threads per block, a {g.tile[1]} x {g.tile[0]} tile "
                  f"of C per block{params}.")
    provisional = targets_note(spec.targets, spec.measured_in)
    lines = [f"## {n}. {title[:1].upper() + title[1:]}", "", rest[:1].upper() + rest[1:], "", "* " + launch,
             "* " + (MULTIPLE_NOTE.format(m=g.tile[1], n=g.tile[0]) if multiples else ANY_NOTE),
             f"* **Speed:** full marks at {kernel.target:g} of cuBLAS, none below {kernel.floor:g}{provisional}."]
    for check in checks:
        lines.append(f"* **Structure** ({check.points:g} point): " +
                     "; ".join(REQUIREMENTS[r][1] for r in check.require) + ".")
    return "\n".join(lines) + (TUNE_NOTE if tuned else "") + (CONFLICT_NOTE if kernel.id == "swizzle" else "")


def build() -> nbformat.NotebookNode:
    spec = load_spec("gemm")
    structure = load_structure("gemm")
    tune = structure.autotune
    cells = [nb.markdown(INTRO),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score\n"
                       "from graders.cuda_engine.structure import check_sass, check_search, score_autotuned, "
                       "tune_launch", "setup")]
    for n, (kid, kernel) in enumerate(spec.kernels.items(), start=1):
        checks = [c for c in structure.checks.values() if c.kernel == kid]
        tuned = tune is not None and kid == tune.kernel
        cells.append(nb.markdown(_statement(n, kernel, spec, checks, tuned)))
        launch = ", **tune_launch(autotuned_choice)" if tuned else ""
        if tuned:
            extra = (f"autotuned_space = {json.dumps(AUTOTUNE_SPACE)}\n"
                     f"autotuned_choice = {json.dumps(AUTOTUNE_CHOICE)}")
            cells += nb.cuda_kernel_cells("gemm", kernel, extra=extra, launch=launch,
                                          score_call=f"score_autotuned('gemm', {kid}_src, autotuned_choice)")
        else:
            cells += nb.cuda_kernel_cells("gemm", kernel)
        for check in checks:
            cells.append(nb.graded_test(nb.assert_compiles("gemm", kid, launch), f"check_sass('gemm', {check.id!r}, "
                                        f"{kid}_src)", check.id, check.points, "structure"))
        if tuned:
            cells.append(nb.graded_test(nb.assert_compiles("gemm", kid, launch),
                                        f"check_search('gemm', {kid}_src, autotuned_space, autotuned_choice)",
                                        tune.check_id, tune.points, "the search space and the choice"))
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
