"""``workshop export``: nbgrader's grades CSV with the points of every graded cell and each kernel's speed.

One row per student and assignment, from the course's gradebook: nbgrader's own columns first (its
``CsvExportPlugin``, exactly as ``nbgrader export`` writes them, students who handed nothing in included),
then the points of each graded cell (by grade_id), then, for each kernel whose hidden test timed it,
``<kernel>_ms``, ``<kernel>_G<unit>/s`` and ``<kernel>_ratio`` (to the baseline), and ``gpu``: the GPU it was
graded on, or ``simulator``.

The speed is read from the hidden test's report in the graded cell's output of the autograded notebook
(`graders.cuda_engine.grade.report`, the text formgrader and the feedback show), the GPU from the
notebook's ``metadata.workshop.graded_on`` (`gradebook.graded_on`).
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import nbformat
import pandas as pd
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import CsvExportPlugin

from gradebook.graded_on import KEY
from graders import settings

KEYS = ["assignment", "student_id"]
# "naive: ok" ... "  your kernel 1.2345 ms (823 GFLOP/s); cuBLAS 0.9876 ms (1029 GFLOP/s); ratio 0.800 (..."
_REPORT = re.compile(r"^(?P<kernel>\w+): .*?\n\s+your kernel (?P<ms>[\d.]+) ms \((?P<rate>[\d.]+) G(?P<unit>\w+)/s\);"
                     r".*?; ratio (?P<ratio>[\d.]+)", re.MULTILINE)


def gradebook_url(course: Path) -> str:
    """The course's gradebook: a relative SQLite path in ``settings.gradebook_url()`` is in ``course``, where
    nbgrader runs."""
    url = settings.gradebook_url()
    path = url.removeprefix("sqlite:///")
    return f"sqlite:///{course / path}" if url.startswith("sqlite:///") and not Path(path).is_absolute() else url


def nbgrader_grades(gb: Gradebook) -> pd.DataFrame:
    """nbgrader's own grades CSV (``nbgrader export``), read back."""
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "grades.csv"
        CsvExportPlugin(to=str(csv)).export(gb)
        return pd.read_csv(csv, dtype={"student_id": str})


def performance(text: str) -> dict[str, float]:
    """A hidden test's report as columns: each timed kernel's ms, throughput (G<unit>/s) and ratio."""
    columns = {}
    for m in _REPORT.finditer(text):
        k = m["kernel"]
        columns |= {f"{k}_ms": float(m["ms"]), f"{k}_G{m['unit']}/s": float(m["rate"]),
                    f"{k}_ratio": float(m["ratio"])}
    return columns


def _graded_cell_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _submission_columns(coursedir: CourseDirectory, submission) -> dict:
    """Points per graded cell from the gradebook; speed and GPU from the autograded notebooks."""
    row: dict = {"assignment": submission.assignment.name, "student_id": submission.student_id}
    folder = Path(coursedir.format_path(coursedir.autograded_directory, submission.student_id,
                                        submission.assignment.name))
    for notebook in submission.notebooks:
        row |= {grade.name: grade.score for grade in notebook.grades}
        path = folder / f"{notebook.name}.ipynb"
        if not path.is_file():
            continue
        nb = nbformat.read(str(path), as_version=4)
        graded_on = nb.metadata.get(KEY, {}).get("graded_on")
        if graded_on:
            row["gpu"] = graded_on["gpu"] if graded_on["target"] == "gpu" else "simulator"
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade"):
                row |= performance(_graded_cell_text(cell))
    return row


def export(course: Path) -> pd.DataFrame:
    """The export of the course in ``course``: nbgrader's columns, then points per cell, speed and GPU."""
    coursedir = CourseDirectory(root=str(course))
    with Gradebook(gradebook_url(course)) as gb:
        grades = nbgrader_grades(gb)
        rows = [_submission_columns(coursedir, s) for a in gb.assignments for s in a.submissions]
    details = pd.DataFrame(rows, columns=KEYS) if not rows else pd.DataFrame(rows)
    return grades.merge(details, on=KEYS, how="left")


def write(course: Path, to: Path) -> Path:
    """`export` as CSV at ``to`` (relative to ``course``); returns its full path."""
    path = (course / to).resolve()
    export(course).to_csv(path, index=False)
    return path
