"""Make student submissions from a released notebook and cell files, as a student's saved notebook."""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from workshop.cells import read_cells, strip_solution_markers

ROOT = Path(__file__).resolve().parent.parent
PUZZLE_SOLUTIONS = ROOT / "solutions" / "puzzles"


def fill(release: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of ``release`` whose solution cells named in ``answers`` (by grade_id) hold those sources."""
    nb = copy.deepcopy(release)
    unknown = set(answers)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
            unknown.discard(grade_id)
    if unknown:
        raise KeyError(f"no solution cells {sorted(unknown)} in the notebook")
    return nb


def reference_answers() -> dict[str, str]:
    cells = read_cells(PUZZLE_SOLUTIONS / "reference.py")
    cells.pop("setup")
    return {grade_id: strip_solution_markers(src) for grade_id, src in cells.items()}


def wrong_answers(*names: str) -> dict[str, str]:
    """The reference answers with the cells of the named files in solutions/puzzles/wrong/ swapped in."""
    answers = reference_answers()
    for name in names:
        answers.update(read_cells(PUZZLE_SOLUTIONS / "wrong" / f"{name}.py"))
    return answers


def write(course: Path, student: str, assignment: str, nb: nbformat.NotebookNode) -> Path:
    path = course / "submitted" / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path
