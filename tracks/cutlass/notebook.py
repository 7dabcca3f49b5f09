"""The CUTLASS rung's nbgrader source notebook, built from spec.toml and the reference kernels.

Per kernel (in spec order): a markdown cell (the step and its hypothesis, from the reference's leading comment; the
launch, the tensor maps the grader passes, the sizes, the speed curve and what its SASS must show), the solution
cell (``<id>_src``: the reference with its kernel body between nbgrader's solution markers; the includes and the
element type above the kernel stay in the stub), a read-only ``<id>_check`` cell (compiles against CUTLASS's
headers for sm_90a, no GPU needed) and the hidden ``<id>_score`` cell.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders.cuda_engine.libraries import CUTLASS_VERSION
from graders.cuda_engine.problems import problem
from graders.cuda_engine.sass import REQUIREMENTS
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, load_spec
from graders.targets_gpu import targets_note

TRACK = "cutlass"

INTRO = f"""# The abstraction ladder, rung 2: CUTLASS

The ladder climbs from Triton (a tile language whose compiler decides the layouts, the copies and the pipeline) to
TileLang (a tile language where you say where each tile lives). Between them sits CUTLASS, NVIDIA's C++ templates for
GEMMs, and CuTe, the layout algebra under CUTLASS 3 and 4: a `Layout` maps coordinates to offsets, a `Tensor` is a
pointer and a layout, and the same algebra describes a swizzled shared-memory tile, the registers a `wgmma` leaves in
each thread and the part of a tile a thread owns. Here you write W2's Hopper GEMM again (`wgmma` fed by TMA through a
pipeline of `mbarrier`s) with CUTLASS {CUTLASS_VERSION}'s names instead of inline PTX: `GMMA::Layout_K_SW128_Atom`
for the swizzle, a `TiledMMA` for the instruction and its partitions, `SM90_TMA_LOAD_2D` for the copy and
`cutlass::arch::ClusterTransactionBarrier` for the barriers. Three steps: the pipeline in bf16, the same in fp16 (one
type changed), and CUTLASS's warp-specialised schedule (a producer warpgroup and two consumers, registers moved with
`setmaxnreg`), persistent and with a TMA-store epilogue as CUTLASS launches it.

`C = A @ B` with `A` M x K row-major, `B` K x N stored column-major (`B[k][n]` at `B[n * K + k]`: both operands are
K-major, as `wgmma` reads them), `C` M x N in fp32, row-major, accumulated in fp32, in bf16 and in fp16. Every
kernel has the signature

    extern "C" __global__ void NAME{{signature}}

(`T`: `bf16` or `f16` as each cell declares it, `unsigned short`, the raw bits; CUTLASS's `bfloat16_t` and `half_t`
are the same 16 bits) and then two tensor maps, `const __grid_constant__ TmaDescriptor mapA, mapB` (CuTe's 128-byte
descriptor type; the last step also `mapC`, for its TMA stores of C). CUTLASS builds tensor maps on the host (`make_tma_copy`); your cell is device code only, so the
grader builds them (`cuTensorMapEncodeTiled`) over `A` and `B` as it allocated them, with the box and swizzle the
step states, and your kernel issues the copies
(`SM90_TMA_LOAD_2D::copy(&mapA, barrier, hint, shared_pointer, k, m)`). The grader compiles each cell with NVRTC for
`sm_90a` against CUTLASS's headers (a CuTe GEMM takes 10 to 30 seconds to compile: the templates are instantiated
then) and launches it itself: a grid of ceil(N / TILE_X) x ceil(M / TILE_Y) blocks of BLOCK_X x BLOCK_Y threads,
with the dynamic shared memory the step states. These names and `BK` (the K depth of a tile in shared memory) and
`STAGES` (the pipeline's buffers) are `#define`d before your code.

**Correct** means what it meant in the tensor-core worklog: on fresh random matrices of several shapes, every element
of C within 4 K 2^-24 (|A| @ |B|) of the float64 product of the same inputs, and a relative Frobenius error below
1e-4. C is filled with NaN before every run and fenced by guard bands; A and B are fenced by NaN too. Correctness is
checked again after timing.

**Speed** is the ratio of {{baseline}}'s time to your kernel's at 4096 x 4096 x 4096, both measured in the same
process on the grading GPU. Points: 1 for a correct kernel, the rest for speed, none below the floor ratio, full at
the target, linear between. The SASS (read with `cuobjdump`) must show `HGMMA`, `UTMALDG` and `SYNCS`: a correct
kernel without them keeps its correctness point only. A kernel that is wrong, crashes or hangs scores 0.

**The ladder's worklog.** Your feedback tabulates the rungs of the fp16 GEMM at 4096^3: hand-written CUDA C++'s,
Triton's, CUTLASS's (your warp-specialised kernel: its lines of code, counted by the grader without blank and comment
lines, its TFLOP/s and its share of cuBLAS) and TileLang's, the others from the references' measured records, with a
chart of lines against speed.

""" + nb.CUDA_CHECK_CELL


def _warpgroups(kernel: KernelSpec) -> str:
    """The block's warpgroups in words: how many, and their roles where the kernel is warp-specialised."""
    count = kernel.geometry.block[0] * kernel.geometry.block[1] // 128
    if kernel.warp_specialised:
        return f"{count} warpgroups: a producer and {count - 1} consumers"
    return f"{count} warpgroups, each its share of the tile"


def _statement(n: int, kernel: KernelSpec, spec: AssignmentSpec) -> str:
    """The step's markdown: title, what it does and its hypothesis from the reference's leading comment, then
    launch, tensor maps, sizes, speed and the SASS it must show."""
    title, _, rest = nb.leading_comment(kernel.reference.read_text()).partition(": ")
    what, _, hypothesis = rest.partition(" Hypothesis: ")
    hypothesis, _, _ = hypothesis.partition(" The launch")
    g = kernel.geometry
    params = "".join(f", {k} = {v}" for k, v in g.params)
    defines = g.defines()
    maps = "; ".join(f"`{m.operand}`'s, a box of " + " x ".join(str(defines.get(b, b)) for b in m.box)
                     + f" elements (innermost first: {', '.join(map(str, m.box))}), swizzle {m.swizzle}"
                     for m in kernel.launch.tensor_maps)
    provisional = targets_note(spec.targets, spec.measured_in)
    must = [REQUIREMENTS[r][1] for r in (*problem(kernel.kind).sass_requirements, *kernel.sass_requirements)]
    grid = ("a persistent grid of one block an SM (or one a tile where there are fewer tiles), "
            if kernel.launch.persistent else "")
    sizes = ", ".join(" x ".join(map(str, s)) for s in kernel.check_shapes)
    lines = [f"## {n}. {title[:1].upper() + title[1:]}", "", what[:1].upper() + what[1:], "",
             f"**Hypothesis:** {hypothesis}", "",
             f"* **Launch:** {grid}{g.block[0]} x {g.block[1]} threads per block ({_warpgroups(kernel)}), a {g.tile[1]} x "
             f"{g.tile[0]} tile of C per block{params}, {kernel.launch.dynamic_smem:,} bytes of dynamic shared "
             f"memory, compiled for {kernel.launch.arch} against CUTLASS {CUTLASS_VERSION}.",
             f"* **Tensor maps** (after `K`, in this order): {maps}.",
             f"* **Sizes:** M is a multiple of {g.tile[1]}, N of {g.tile[0]}, K of {defines['BK']}; checked at "
             f"{sizes}.",
             f"* **Speed:** full marks at {kernel.target:g} of cuBLAS, none below {kernel.floor:g}{provisional}; "
             f"{kernel.points_correct:g} point for a correct kernel, up to {kernel.points_perf:g} for speed.",
             f"* **SASS:** {'; '.join(must)}; else the correctness point only."]
    return "\n".join(lines)


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    kind = problem(next(iter(spec.kernels.values())).kind)
    cells = [nb.markdown(INTRO.format(signature=kind.signature.replace("bf16", "T"), baseline="cuBLAS")),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score", "setup")]
    for n, kernel in enumerate(spec.kernels.values(), start=1):
        cells.append(nb.markdown(_statement(n, kernel, spec)))
        cells += nb.cuda_kernel_cells(TRACK, kernel)
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
