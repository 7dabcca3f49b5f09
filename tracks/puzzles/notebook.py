"""The GPU Puzzles' nbgrader source notebook, built from the puzzles (problem.py), spec.toml and the reference
cells (solutions/reference.py).

Per puzzle: a statement, the solution cell (grade_id = puzzle id), a read-only self-check cell, and two
graded cells: ``<id>_correct`` (correctness) and ``<id>_limits`` (access limits), each a test on the public
inputs that raises when it fails (what ``nbgrader validate`` reports) and the hidden test on fresh inputs.
"""
from __future__ import annotations

import ast

import nbformat

from graders import notebook as nb
from graders import tracks
from graders.numba_engine.puzzle import Puzzle
from workshop.cells import read_cells

TRACK = tracks.get("puzzles")

INTRO = """# GPU Puzzles

Fourteen small CUDA kernels written with `numba.cuda`, from a one-line map to a tiled matrix multiply.
For each puzzle, fill in the body of the kernel in its cell. You never allocate arrays or launch the
kernel yourself: the grader does, with the geometry the puzzle states, always as
`kernel[blocks, threads](out, *inputs, *scalars)`.

* Run the **check** cell under each puzzle: it runs your kernel on the public inputs and counts its
  global-memory accesses, with the same messages as the hidden tests.
* Hidden tests use fresh random inputs and more sizes, including sizes that are not a multiple of the
  block. Each puzzle is worth {correct} points for correctness and {limits} for staying within its access
  limits (counted only for a correct kernel).
* Without a GPU, kernels run in numba-cuda's simulator; on the grading worker correctness runs on the
  GPU and the accesses are counted in the simulator. Keep each kernel's cell self-contained: constants
  such as `TPB` in the same cell, no Python objects from other cells.
"""


def _parameters(cell: str, kernel_name: str) -> list[str]:
    """The parameter names of ``kernel_name`` in a reference cell, as the statement names its arguments."""
    kernel = next(node for node in ast.parse(cell).body
                  if isinstance(node, ast.FunctionDef) and node.name == kernel_name)
    return [a.arg for a in kernel.args.args]


def _statement(p: Puzzle, cell: str) -> str:
    names = _parameters(cell, p.kernel_name)
    public = "\n".join(f"* public: {c.describe(names)}" for c in p.cases("public"))
    hidden = ", ".join(str(s) for s in p.hidden_sizes)
    return (f"## Puzzle {p.number}: {p.title}\n\n{p.statement}\n\n{public}\n* hidden tests: sizes "
            f"{hidden}, fresh inputs\n* access limits: {p.limits.describe()}\n")


IMPORTS = ("from graders.numba_engine.grade import check",
           "from graders.numba_engine.grade import assert_correct, assert_within_limits, check")
GRADED = (("correct", "assert_correct", "grade_correctness", "correct on fresh inputs and more sizes"),
          ("limits", "assert_within_limits", "grade_limits", "within the access limits"))


def _graded_tests(p: Puzzle, points: dict) -> list[nbformat.NotebookNode]:
    return [nb.graded_test(f"{public}({p.id!r}, {p.kernel_name})",
                           f"from graders.numba_engine.grade import {hidden}\n{hidden}({p.id!r}, {p.kernel_name})",
                           f"{p.id}_{part}", points[f"points_{part}"], what)
            for part, public, hidden, what in GRADED]


def _setup(reference: str) -> str:
    """The reference's set-up cell, importing the graded cells' public tests beside ``check``."""
    if IMPORTS[0] not in reference:
        raise ValueError(f"the reference's setup cell lacks `{IMPORTS[0]}`")
    return reference.replace(*IMPORTS)


def build() -> nbformat.NotebookNode:
    points = TRACK.assignment
    reference = read_cells(TRACK.solutions / "reference.py")
    cells = [nb.markdown(INTRO.format(correct=points["points_correct"], limits=points["points_limits"])),
             nb.locked(nb.numba_setup(_setup(reference["setup"])), "setup")]
    for p in TRACK.problem_module().PUZZLES:
        cells += [nb.markdown(_statement(p, reference[p.id])), nb.solution(reference[p.id], p.id),
                  nb.check_cell(f"check({p.id!r}, {p.kernel_name})", f"{p.id}_check", p.title),
                  *_graded_tests(p, points)]
    return nb.notebook(cells)
