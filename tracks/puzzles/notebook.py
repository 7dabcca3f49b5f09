"""Build the puzzles assignment's nbgrader *source* notebook from the puzzle specs and the reference cells.

Per puzzle: a statement, the solution cell (grade_id = puzzle id), a read-only self-check cell, and two
hidden test cells: ``<id>_correct`` (correctness on fresh inputs) and ``<id>_limits`` (access limits).
``workshop build-notebook`` writes it; a test checks that the committed notebook is up to date.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from graders import tracks
from graders.numba_engine.catalogue import PUZZLES
from graders.numba_engine.puzzle import Puzzle
from workshop.cells import read_cells

TRACK = tracks.get("puzzles")
REFERENCE = TRACK.solutions / "reference.py"
NOTEBOOK = TRACK.notebook_path
CORRECT_POINTS = 2
LIMITS_POINTS = 1

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
""".format(correct=CORRECT_POINTS, limits=LIMITS_POINTS)


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points: int | None = None) -> dict:
    meta = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _statement(p: Puzzle) -> str:
    public = "\n".join(f"* public: {c.describe()}" for c in p.cases("public"))
    hidden = ", ".join(str(s) for s in p.hidden_sizes)
    return (f"## Puzzle {p.number}: {p.title}\n\n{p.statement}\n\n{public}\n* hidden tests: sizes "
            f"{hidden}, fresh inputs\n* access limits: {p.limits.describe()}\n")


def _hidden_test(p: Puzzle, part: str, call: str, points: int):
    source = (f"# Hidden test: {part} ({points} point{'s' if points > 1 else ''})\n"
              "### BEGIN HIDDEN TESTS\n"
              f"from graders.numba_engine.grade import {call}\n"
              f"{call}({p.id!r}, {p.kernel_name})\n"
              "### END HIDDEN TESTS")
    return new_code_cell(source, metadata=_meta(f"{p.id}_{part}", grade=True, locked=True, points=points))


def build() -> nbformat.NotebookNode:
    cells = read_cells(REFERENCE)
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": "python"}})
    nb.cells = [new_markdown_cell(INTRO), new_code_cell(cells["setup"], metadata=_meta("setup", locked=True))]
    for p in PUZZLES:
        nb.cells += [
            new_markdown_cell(_statement(p)),
            new_code_cell(cells[p.id], metadata=_meta(p.id, solution=True)),
            new_code_cell(f"check({p.id!r}, {p.kernel_name})", metadata=_meta(f"{p.id}_check", locked=True)),
            _hidden_test(p, "correct", "grade_correctness", CORRECT_POINTS),
            _hidden_test(p, "limits", "grade_limits", LIMITS_POINTS),
        ]
    for i, cell in enumerate(nb.cells):  # stable ids keep the committed notebook's diff readable
        cell["id"] = f"cell-{i:03d}"
    return nb


def write(path: Path = NOTEBOOK) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build(), str(path))
    return path
