"""The Hopper worklog's nbgrader source notebook, built from spec.toml and the reference kernels.

Per kernel (in spec order): a markdown cell (the step and its hypothesis, from the reference's leading comment;
the launch, the tensor maps the grader passes, the sizes, the speed curve and what its SASS must show), the
solution cell (``<id>_src``: the reference with its kernel body between nbgrader's solution markers; the PTX
helper functions above the kernel stay in the stub), a read-only ``<id>_check`` cell (compiles for sm_90a, no GPU
needed) and the hidden ``<id>_score`` cell.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders.cuda_engine.problems import problem
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec

TRACK = "hopper"

INTRO = """# Beating cuBLAS on Hopper: the worklog

bf16 matrix-multiply kernels on Hopper's own machinery, one step at a time: `wgmma` (the warpgroup MMA) from
shared memory, then tiles copied by the tensor memory accelerator (TMA) and completed on an `mbarrier`, then a
multi-stage pipeline of full and empty barriers, each graded as a fraction of cuBLAS's bf16 GEMM on the same GPU.
`C = A @ B` with `A` M x K in bfloat16, row-major, `B` K x N in bfloat16 stored column-major (`B[k][n]` at
`B[n * K + k]`: both operands are K-major, the layout `wgmma` reads without a transpose), and `C` M x N in fp32,
row-major, accumulated in fp32. Every kernel has the signature

    extern "C" __global__ void NAME{signature}

and, where a step says so, tensor maps after `K`, each declared `const __grid_constant__ CUtensorMap`: the grader
builds them (`cuTensorMapEncodeTiled`) over `A` and `B` as it allocated them, with the box and swizzle the step
states, and passes them by value. `bf16` is `unsigned short`, the raw bits of a bfloat16 (each cell declares it;
the grader's NVRTC has no `cuda_bf16.h` or `cuda.h`, so the Hopper instructions are written as inline PTX, and the
helper functions above each kernel show how). The grader compiles each cell with NVRTC for `sm_90a` (`wgmma` exists
on that target only) and launches it itself: a grid of ceil(N / TILE_X) x ceil(M / TILE_Y) blocks of BLOCK_X
threads, with the dynamic shared memory a step states. These names and each step's parameters (`BK`, the K depth
of a tile in shared memory; `STAGES`, the pipeline's buffers) are `#define`d before your code.

**Correct** means what it meant in the tensor-core worklog: on fresh random matrices of several shapes, every
element of C within 4 K 2^-24 (|A| @ |B|) of the float64 product of the same inputs, and a relative Frobenius error
below 1e-4 (fp32 accumulation's own error, with a factor 2 to spare). C is filled with NaN before every run and
fenced by guard bands, so an element you never write, or a write outside C, fails; A and B are fenced by NaN too.
Correctness is checked again after timing.

**Speed** is the ratio of {baseline}'s time to your kernel's at 4096 x 4096 x 4096, both measured in the same
process on the grading GPU: 0.5 means half of cuBLAS's TFLOP/s. The tensor-core worklog stopped at `mma.sync`, which
cannot reach Hopper's tensor-core rate; cuBLAS uses `wgmma` fed by TMA, and so do these steps. Points: 1 for a correct
kernel, the rest for speed, none below the floor ratio, full at the target, linear between. Each step's SASS
(read with `cuobjdump`) must show what its lesson adds: `HGMMA` (wgmma), `UTMALDG` (a TMA copy), `SYNCS` (mbarrier
operations). A correct kernel whose SASS misses one, such as an `mma.sync` kernel in a wgmma step, keeps its
correctness point only. A kernel that is wrong, writes outside C, crashes or hangs scores 0 for that kernel.

Your submission is kernel source only: it runs in a separate process that compiles the string, so it cannot
call cuBLAS, torch or any host code.

""" + nb.CUDA_CHECK_CELL


def _sizes(kernel: KernelSpec) -> str:
    g = kernel.geometry
    depth = dict(g.params)["BK"]
    return (f"**Sizes:** M is a multiple of {g.tile[1]}, N of {g.tile[0]} (the tile), K of {depth}; checked at "
            + ", ".join(" x ".join(map(str, s)) for s in kernel.check_shapes) + ".")


def _tensor_maps(kernel: KernelSpec) -> str:
    defines = kernel.geometry.defines()
    maps = [f"`{m.operand}`'s, a box of " + " x ".join(str(defines.get(b, b)) for b in m.box)
            + f" elements (innermost first: {', '.join(map(str, m.box))}), swizzle {m.swizzle}"
            for m in kernel.launch.tensor_maps]
    return f"* **Tensor maps** (after `K`, in this order): {'; '.join(maps)}." if maps else ""


def _statement(n: int, kernel: KernelSpec, spec: AssignmentSpec) -> str:
    """The step's markdown: title, what it does and its hypothesis from the reference's leading comment, then
    launch, tensor maps, sizes, speed and the SASS it must show."""
    title, _, rest = nb.leading_comment(kernel.reference.read_text()).partition(": ")
    what, _, hypothesis = rest.partition(" Hypothesis: ")
    hypothesis, _, _ = hypothesis.partition(" The launch")
    g = kernel.geometry
    params = "".join(f", {k} = {v}" for k, v in g.params)
    smem = (f", {kernel.launch.dynamic_smem:,} bytes of dynamic shared memory" if kernel.launch.dynamic_smem else "")
    provisional = " (provisional until measured on the grading GPU)" if spec.targets == "provisional" else ""
    must = [REQUIREMENTS[r][1] for r in (*problem(kernel.kind).sass_requirements, *kernel.sass_requirements)]
    lines = [f"## {n}. {title[:1].upper() + title[1:]}", "", what[:1].upper() + what[1:], "",
             f"**Hypothesis:** {hypothesis}", "",
             f"* **Launch:** {g.block[0] * g.block[1]} threads per block (one warpgroup), a {g.tile[1]} x {g.tile[0]} "
             f"tile of C per block{params}{smem}, compiled for {kernel.launch.arch}.",
             *([_tensor_maps(kernel)] if kernel.launch.tensor_maps else []),
             "* " + _sizes(kernel),
             f"* **Speed:** full marks at {kernel.target:g} of cuBLAS, none below {kernel.floor:g}{provisional}; "
             f"{kernel.points_correct:g} point for a correct kernel, up to {kernel.points_perf:g} for speed.",
             f"* **SASS:** {'; '.join(must)}; else the correctness point only."]
    return "\n".join(lines)


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    kind = problem(next(iter(spec.kernels.values())).kind)
    cells = [nb.markdown(INTRO.format(signature=kind.signature, baseline=kind.baseline_name)),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score", "setup")]
    for n, kernel in enumerate(spec.kernels.values(), start=1):
        cells.append(nb.markdown(_statement(n, kernel, spec)))
        cells += nb.cuda_kernel_cells(TRACK, kernel)
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
