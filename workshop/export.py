"""``workshop export``: nbgrader's grades CSV with the points of every graded cell and each kernel's speed.

One row per student and assignment, from the course's gradebook: nbgrader's own columns first (its
``CsvExportPlugin``, exactly as ``nbgrader export`` writes them, students who handed nothing in included),
then the points of each graded cell (by grade_id), then, for each kernel whose hidden test timed it,
``<kernel>_ms``, ``<kernel>_G<unit>/s`` and ``<kernel>_ratio`` (to the baseline); for each correct ``ModelNew``
of a model track, ``<problem>_ms`` and ``<problem>_speedup_<baseline>`` (eager, compile); and ``gpu``: the GPU it
was graded on, or ``simulator``.

The speed comes from what each graded cell's hidden test graded, stored in the autograded notebook by the
trusted grader (``metadata.workshop.results`` of the graded cells, `graders.autograde.TrustedGrades`), the GPU
from the notebook's ``metadata.workshop.graded_on`` (`gradebook.graded_on`).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
import pandas as pd
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import CsvExportPlugin
from traitlets.config.loader import PyFileConfigLoader

from gradebook.graded_on import KEY
from graders import settings
from graders.autograde import graded_cells, stored_results
from graders.cuda_engine.grade import CORRECT
from graders.result import Status

KEYS = ["assignment", "student_id"]


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


def performance(results: list[dict]) -> dict[str, float]:
    """Each timed kernel's ms, throughput (G<unit>/s) and ratio, from the results of one graded cell; a model's
    (`graders.model_engine`) ms and speed-up over each baseline its grading timed."""
    columns = {}
    for result in results:
        timing = result.get("timing")
        if timing and "speedup" in timing and result["status"] == Status.OK:
            k = result["test"]
            columns |= {f"{k}_ms": timing["submission"]["median_s"] * 1e3}
            columns |= {f"{k}_speedup_{base}": speedup for base, speedup in timing["speedup"].items()}
        elif timing and Status(result["status"]) in CORRECT:
            k, unit = result["test"], timing["work_unit"]
            columns |= {f"{k}_ms": timing["kernel"]["median_s"] * 1e3,
                        f"{k}_G{unit}/s": timing["kernel"]["throughput"] / 1e9, f"{k}_ratio": timing["ratio"]}
    return columns


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
        for cell in graded_cells(nb):
            row |= performance(stored_results(cell))
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


def never_released(course: Path) -> list[str]:
    """Assignments in the gradebook that were never released to the course's exchange and have no submission
    (generated only: nbgrader's export and formgrader still count them, 0 for every student). [] when the
    exchange cannot be read (a coordinator without it)."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.resolve())).load_config()
    outbound = Path(config.Exchange.get("root", "/srv/nbgrader/exchange")) / config.CourseDirectory.course_id / "outbound"
    if not outbound.is_dir():
        return []
    released = {p.name for p in outbound.iterdir()}
    with Gradebook(gradebook_url(course)) as gb:
        return sorted(a.name for a in gb.assignments if a.name not in released and not a.submissions)
