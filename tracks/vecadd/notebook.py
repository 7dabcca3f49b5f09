"""The vecadd track's nbgrader source notebook, built from its spec, its problem kind and its reference kernels.

Cells: an introduction (what the kernels compute, how they are launched and graded), the set-up cell, then
per kernel in spec order: a markdown cell (title, the reference's leading comment, launch, sizes, speed,
points), the solution cell (``<id>_src``: the reference with its kernel body between nbgrader's solution
markers; with ``student_geometry`` also ``<id>_block`` and ``<id>_tile``), a read-only ``<id>_check`` cell
(compiles, no GPU needed) and the hidden ``<id>_score`` cell.
"""
from __future__ import annotations

import nbformat

from graders.cuda_engine.problems import Problem, problem
from graders.cuda_engine.spec import KernelSpec, load_spec
from graders.notebook import (CUDA_CHECK_CELL, CUDA_LANGUAGE, cuda_kernel_cells, leading_comment, locked, markdown,
                              notebook)
from graders.targets_gpu import targets_note

TRACK = "vecadd"
KIND = "vecadd"
TITLES = {"add": "One element per thread", "add_float4": "float4 loads and stores"}

INTRO = """# Vector add

A warm-up of {count} CUDA C++ kernels that add two fp32 vectors of `n` elements, `out[i] = a[i] + b[i]`.
Every kernel has the signature

    extern "C" __global__ void NAME{signature}

Write each kernel as CUDA C++ in the string of its cell. The grader compiles it with NVRTC and launches it
itself: a grid of ceil(n / TILE_X) blocks of BLOCK_X threads. `BLOCK_X`, `TILE_X` (the elements one block
covers, a multiple of `BLOCK_X`) and `BLOCK_Y` = `TILE_Y` = 1 are `#define`d before your code.

**Correct** means: on fresh random vectors of several lengths, `out` equal to `a + b` bit for bit. `out` is
filled with NaN before every run and fenced by guard bands, so an element you never write, or a write past
either end of `out`, fails. Correctness is checked again after timing.

**Speed** is the ratio of {baseline}'s time to your kernel's on a vector far larger than the GPU's caches,
both measured in the same process on the grading GPU: 0.5 means half of {baseline}'s bandwidth. Each kernel
earns points for being correct and more for speed: none below its floor ratio, full at its target, linear
between. A kernel that is wrong, writes outside `out`, crashes or hangs scores 0.

""" + CUDA_CHECK_CELL

SETUP = "from graders.cuda_engine.grade import assert_compiles, check, score"


def _launch(kernel: KernelSpec) -> str:
    block, tile = kernel.geometry.block[0], kernel.geometry.tile[0]
    per_thread = f"{tile // block} element{'s' if tile != block else ''} per thread"
    if not kernel.student_geometry:
        return f"**Launch:** blocks of {block} threads, {tile} elements per block ({per_thread})."
    return (f"**Launch:** yours. Set `{kernel.id}_block` (threads per block, `(x, 1)`) and `{kernel.id}_tile` "
            f"(elements per block, `(x, 1)`: a multiple of the block, and of 4). The defaults, {block} threads "
            f"and {tile} elements, give {per_thread}.")


def _statement(number: int, kernel: KernelSpec, kind: Problem, note: str) -> str:
    baseline = f"`{kind.baseline_name}`"
    n = kernel.perf_shape[0]
    return "\n".join([
        f"## {number}. {TITLES[kernel.id]}", "",
        leading_comment(kernel.reference.read_text()), "",
        "* " + _launch(kernel),
        "* **Sizes checked:** n = " + ", ".join(f"{s[0]:,}" for s in kernel.check_shapes) + ".",
        f"* **Speed:** timed at n = {n:,} ({kind.work((n,)) / 2**20:,.0f} MiB moved per launch).",
        f"* **Points:** {kernel.points_correct:g} for a correct kernel, up to {kernel.points_perf:g} more for "
        f"speed: full at {kernel.target:g} of {baseline}'s speed, none below {kernel.floor:g}"
        + note + ".",
    ])


def build() -> nbformat.NotebookNode:
    spec = load_spec(TRACK)
    kind = problem(KIND)
    cells = [markdown(INTRO.format(count=len(spec.kernels), signature=kind.signature,
                                   baseline=f"`{kind.baseline_name}`")),
             locked(SETUP, "setup")]
    for number, (kid, kernel) in enumerate(spec.kernels.items(), start=1):
        cells.append(markdown(_statement(number, kernel, kind, targets_note(spec.targets, spec.measured_in))))
        if kernel.student_geometry:
            g = kernel.geometry
            cells += cuda_kernel_cells(TRACK, kernel, extra=f"{kid}_block = {g.block}\n{kid}_tile = {g.tile}",
                                       launch=f", block={kid}_block, tile={kid}_tile")
        else:
            cells += cuda_kernel_cells(TRACK, kernel)
    return notebook(cells, CUDA_LANGUAGE)
