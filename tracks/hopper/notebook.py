"""The Hopper worklog's nbgrader source notebook, built from spec.toml and the reference kernels.

Per kernel (in spec order): a markdown cell (the step and its hypothesis, from the reference's leading comment;
the launch, the tensor maps the grader passes, the sizes, the speed curve, what its SASS must show and what public
Hopper worklogs measured for the step, `PUBLISHED`; this track's own numbers are not measured yet), the
solution cell (``<id>_src``: the reference with its kernel body between nbgrader's solution markers; the PTX
helper functions above the kernel stay in the stub), a read-only ``<id>_check`` cell (compiles for sm_90a, no GPU
needed) and the hidden ``<id>_score`` cell.
"""
from __future__ import annotations

import functools
import json

import nbformat

from graders import notebook as nb
from graders.cuda_engine.problems import problem
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.settings import ROOT
from graders.targets_gpu import targets_note

TRACK = "hopper"

INTRO = """# Beating cuBLAS on Hopper: the worklog

bf16 matrix-multiply kernels on Hopper's own machinery, one step at a time: `wgmma` (the warpgroup MMA) from
shared memory, then tiles copied by the tensor memory accelerator (TMA) and completed on an `mbarrier`, then a
multi-stage pipeline of full and empty barriers, then warp specialisation (a producer warpgroup that only copies,
consumer warpgroups that only multiply, `setmaxnreg` moving registers between them), larger tiles with two
consumers, clusters of blocks that share a tile through TMA multicast, and a persistent kernel with its own tile
order that stores C through shared memory with TMA: each graded as a fraction of cuBLAS's bf16 GEMM on the same
GPU. Each step states the number public Hopper worklogs reached with its technique; this track's own numbers are
not measured yet (its references have not run on a GPU: the grading GPU's records will give them).
`C = A @ B` with `A` M x K in bfloat16, row-major, `B` K x N in bfloat16 stored column-major (`B[k][n]` at
`B[n * K + k]`: both operands are K-major, the layout `wgmma` reads without a transpose), and `C` M x N in fp32,
row-major, accumulated in fp32. Every kernel has the signature

    extern "C" __global__ void NAME{signature}

and, where a step says so, tensor maps after `K`, each declared `const __grid_constant__ CUtensorMap`: the grader
builds them (`cuTensorMapEncodeTiled`) over `A`, `B` and (for the TMA store) `C` as it allocated them, with the box
and swizzle the step states, and passes them by value. `bf16` is `unsigned short`, the raw bits of a bfloat16 (each
cell declares it; the grader's NVRTC has no `cuda_bf16.h` or `cuda.h`, so the Hopper instructions are written as
inline PTX, and the helper functions above each kernel show how). The grader compiles each cell with NVRTC for
`sm_90a` (`wgmma` and `setmaxnreg` exist on that target only) and launches it itself: a grid of ceil(N / TILE_X) x
ceil(M / TILE_Y) blocks of BLOCK_X threads, in clusters where a step says so, with the dynamic shared memory a step
states; the persistent step gets one row of blocks instead, one an SM (or one a tile, where there are fewer tiles),
in whole clusters, and walks the tiles itself. These names and each step's parameters (`BK`, the K depth of a tile
in shared memory; `STAGES`, the pipeline's buffers) are `#define`d before your code.

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
operations), `USETMAXREG` (setmaxnreg, both ways), `UTMALDG.MULTICAST` (a multicast copy), `UTMASTG` (a TMA store).
A correct kernel whose SASS misses one, such as an `mma.sync` kernel in a wgmma step, keeps its
correctness point only. A kernel that is wrong, writes outside C, crashes or hangs scores 0 for that kernel.

Your submission is kernel source only: it runs in a separate process that compiles the string, so it cannot
call cuBLAS, torch or any host code.

""" + nb.CUDA_CHECK_CELL


# What public Hopper worklogs measured with each step's technique, on an H100 SXM against cuBLAS bf16 there
# (Pranjal Shankhdhar's "Outperforming cuBLAS on H100" and its fast.cu, whose kernels number differently; the
# course's chapter "Beating cuBLAS on an H100").
PUBLISHED = {
    "specialised": "fast.cu's kernel 4, a producer and three consumer warpgroups with setmaxnreg on 192 x 192 tiles: "
                   "635 TFLOP/s at 8192^3, 80% of cuBLAS's 798 (its one-warpgroup TMA kernel: 489).",
    "two_consumers": "fast.cu moved to two consumer warpgroups on 128 x 256 tiles (m64n256k16) in its kernel 7, "
                     "together with the next step's clusters; its worklog found more consumer warpgroups slower.",
    "cluster": "fast.cu's kernel 7, clusters of two blocks along M sharing a tile by TMA multicast: 799 TFLOP/s "
               "at 8192^3 against cuBLAS's 798 (100%), 774 against 741 at 6144^3 (104%).",
    "persistent": "fast.cu's kernel 11, persistent since its kernel 5 (658 TFLOP/s at 8192^3), with a Hilbert-curve "
                  "tile order and TMA stores: 808 TFLOP/s at 8192^3 (101% of cuBLAS), 795 against 741 at 6144^3 "
                  "(107%); its worklog's 4096^3 table ends at 764 against cuBLAS's 716 (107%), as does the course's "
                  "chapter (107% at 4096^3).",
}

# What a step's reference, written another way, measured (one run, both numbers from it)
PITFALLS = {
    "cluster": "arrive on the other block's empty barrier at the default scope (`mbarrier.arrive.shared::cluster`), "
               "as CUTLASS's pipelines do. Cluster scope (`.release.cluster` on the arrive, `.acquire.cluster` on "
               "the producer's wait) compiles to a `MEMBAR.ALL.GPU` and an L1 invalidation (`CCTL.IVALL`) in every "
               "slab: this step's reference written that way ran at 0.594 of cuBLAS on the H200, where the step "
               "before ran at 0.935 (Nsight Compute's compute throughput: 46.6% against 81.2%).",
}


# The latest record of every reference measured alone (tests/gpu/test_hopper_gpu.py), whose numbers each step shows
REFERENCE_RECORD = "benchmarks/results/hopper/hopper-20261206-092524.json"


@functools.cache
def _reference_record() -> dict:
    return json.loads((ROOT / REFERENCE_RECORD).read_text())


def _measured(kernel: KernelSpec) -> str:
    """The reference's number in `REFERENCE_RECORD`."""
    record = _reference_record()
    size, row = next(iter(record["sizes"].items()))
    found = row["kernels"][kernel.id]
    return (f"This track's reference: {found['gflops'] / 1e3:.0f} TFLOP/s at {size}, {found['ratio']:.1%} of "
            f"cuBLAS's {row['cublas_gflops'] / 1e3:.0f} on an {record['gpu']} (`{REFERENCE_RECORD}`).")


def _sizes(kernel: KernelSpec) -> str:
    g = kernel.geometry
    depth = dict(g.params)["BK"]
    pair = " (two tiles: the cluster's blocks pair along M)" if kernel.launch.cluster else " (the tile)"
    rows = g.tile[1] * (2 if kernel.launch.cluster else 1)
    return (f"**Sizes:** M is a multiple of {rows}{pair}, N of {g.tile[0]}, K of {depth}; checked at "
            + ", ".join(" x ".join(map(str, s)) for s in kernel.check_shapes) + ".")


def _launch(kernel: KernelSpec) -> str:
    """The launch line: threads and their warpgroups' roles, the tile, parameters, shared memory, clusters."""
    g = kernel.geometry
    threads = g.block[0] * g.block[1]
    roles = {1: "one warpgroup", 2: "two warpgroups: a producer and a consumer",
             3: "three warpgroups: a producer and two consumers"}[threads // 128]
    params = "".join(f", {k} = {v}" for k, v in g.params)
    smem = f", {kernel.launch.dynamic_smem:,} bytes of dynamic shared memory" if kernel.launch.dynamic_smem else ""
    cluster = (f", in clusters of {kernel.launch.cluster[0]} x {kernel.launch.cluster[1]} blocks"
               if kernel.launch.cluster else "")
    grid = (" a persistent grid of one row of blocks, one an SM (or one a tile where there are fewer), of"
            if kernel.launch.persistent else "")
    return (f"* **Launch:**{grid} {threads} threads per block ({roles}), a {g.tile[1]} x {g.tile[0]} tile of C per "
            f"block{params}{smem}{cluster}, compiled for {kernel.launch.arch}.")


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
    provisional = targets_note(spec.targets, spec.measured_in)
    must = [REQUIREMENTS[r][1] for r in (*problem(kernel.kind).sass_requirements, *kernel.sass_requirements)]
    lines = [f"## {n}. {title[:1].upper() + title[1:]}", "", what[:1].upper() + what[1:], "",
             f"**Hypothesis:** {hypothesis}", "",
             _launch(kernel),
             *([_tensor_maps(kernel)] if kernel.launch.tensor_maps else []),
             "* " + _sizes(kernel),
             f"* **Speed:** full marks at {kernel.target:g} of cuBLAS, none below {kernel.floor:g}{provisional}; "
             f"{kernel.points_correct:g} point for a correct kernel, up to {kernel.points_perf:g} for speed.",
             f"* **SASS:** {'; '.join(must)}; else the correctness point only.",
             *([f"* **Pitfall:** {PITFALLS[kernel.id]}"] if kernel.id in PITFALLS else []),
             *([f"* **Public worklogs** (H100 SXM): {PUBLISHED[kernel.id]}"] if kernel.id in PUBLISHED else []),
             f"* {_measured(kernel)}"]
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
