"""The transpose ladder's nbgrader source notebook, built from spec.toml and the reference kernels.

Per kernel (in spec order): its statement (launch geometry and speed targets from the spec), the solution
cell (``<id>_src = r\"\"\"...\"\"\"``: the reference with its kernel body between nbgrader's solution markers;
a kernel with student geometry also sets ``<id>_block`` and ``<id>_tile``), a read-only ``<id>_check`` cell
(compiles, no GPU needed) and the hidden ``<id>_score`` cell.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders.cuda_engine.spec import KernelSpec, load_spec
from graders.targets_gpu import targets_note

INTRO = """# The transpose ladder

Five CUDA C++ kernels on fp32 matrices, each a step up in speed: a copy (the roof), a naive transpose, a
shared-memory tiled transpose, the tile padded against bank conflicts, and your best. `in` is `rows x cols`,
row-major; `out` is `cols x rows` (`rows x cols` for the copy). Every kernel has the signature

    extern "C" __global__ void NAME(float* out, const float* in, int rows, int cols)

Write each kernel as CUDA C++ in the string of its cell. The grader compiles it with NVRTC, launches it with
the stated geometry (grid = ceil(cols / TILE_X) x ceil(rows / TILE_Y) blocks of BLOCK_X x BLOCK_Y threads;
these four names are `#define`d for you), checks it on fresh random matrices of several shapes (square,
non-square, not multiples of 32), and times it against a device-to-device copy of the same bytes on the
grading GPU. Points: {correct:g} for a correct kernel, the rest for speed: none below the floor ratio, full at the
target ratio, linear between.

""" + nb.CUDA_CHECK_CELL + """
* A kernel that is wrong, writes outside `out`, crashes or hangs scores 0 for that kernel."""

# Each step's title and statement; {bx} x {by} is the block (threads), {tx} x {ty} the tile (columns x rows),
# {per} the elements per thread.
STEPS = {
    "copy": ("Copy", "Copy `in` to `out`. Each block copies a TILE_Y x TILE_X ({ty} x {tx}) tile with {bx} x {by} "
             "threads, so each thread copies {per} elements (or one `float4`, where every row starts on a 16-byte "
             "boundary)."),
    "naive": ("Naive transpose", "One element per thread (blocks of {bx} x {by} threads, tile {tx} x {ty}): read "
              "`in[row][col]`, write `out[col][row]`."),
    "tiled": ("Tiled transpose", "Stage a {ty} x {tx} tile in shared memory so that both the reads from `in` and "
              "the writes to `out` are coalesced. {bx} x {by} threads, {per} elements each."),
    "padded": ("Padded tile", "The tiled transpose with the shared tile padded to {padded} columns, so reading a "
               "column of it hits 32 different banks."),
    "best": ("Your best", "Any correct transpose. You choose the launch geometry: set `{id}_block` (threads, x "
             "and y) and `{id}_tile` (elements per block, x = columns, y = rows; a multiple of the block). The "
             "defaults, {bx} x {by} threads and a {tx} x {ty} tile, give each thread {per} elements."),
}


def _statement(n: int, kernel: KernelSpec, note: str) -> str:
    g = kernel.geometry
    title, text = STEPS[kernel.id]
    text = text.format(id=kernel.id, bx=g.block[0], by=g.block[1], tx=g.tile[0], ty=g.tile[1],
                       per=g.elements_per_thread, padded=g.tile[0] + 1)
    return (f"## {n}. {title}\n\n{text}\n\n"
            f"* speed: full marks at {kernel.target:g} of the copy's speed, none below {kernel.floor:g}{note}")


def build() -> nbformat.NotebookNode:
    spec = load_spec("transpose")
    (correct,) = {k.points_correct for k in spec.kernels.values()}   # the intro states one value for all
    cells = [nb.markdown(INTRO.format(correct=correct)),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, check, score", "setup")]
    for n, (kid, kernel) in enumerate(spec.kernels.items(), start=1):
        cells.append(nb.markdown(_statement(n, kernel, targets_note(spec.targets, spec.measured_in))))
        if kernel.student_geometry:
            g = kernel.geometry
            cells += nb.cuda_kernel_cells("transpose", kernel, extra=f"{kid}_block = {g.block}\n{kid}_tile = {g.tile}",
                                          launch=f", block={kid}_block, tile={kid}_tile")
        else:
            cells += nb.cuda_kernel_cells("transpose", kernel)
    return nb.notebook(cells, nb.CUDA_LANGUAGE)
