"""Per-student, per-part scores from an nbgrader gradebook, and the messages of failed test cells."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pandas as pd
from nbgrader.api import Gradebook
from nbgrader.utils import is_grade


def cell_scores(db_url: str, assignment: str) -> pd.DataFrame:
    """One row per (student, grade cell): score and max_score of each autograded test cell."""
    rows = []
    with Gradebook(db_url) as gb:
        for submission in gb.assignment_submissions(assignment):
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    rows.append({"student": submission.student_id, "notebook": notebook.name,
                                 "cell": grade.name, "score": grade.score, "max_score": grade.max_score})
    return pd.DataFrame(rows, columns=["student", "notebook", "cell", "score", "max_score"])


def student_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Students as rows, grade cells as columns, plus ``total`` and ``max``."""
    table = scores.pivot_table(index="student", columns="cell", values="score", aggfunc="sum", sort=False)
    table["total"] = table.sum(axis=1)
    table["max"] = scores.groupby("student")["max_score"].sum()
    return table


def failure_messages(autograded: Path) -> dict[str, str]:
    """The error line of each failed test cell in an autograded notebook, by grade_id."""
    nb = nbformat.read(str(autograded), as_version=4)
    messages = {}
    for cell in nb.cells:
        if not is_grade(cell) or cell.cell_type != "code":
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                messages[grade_id] = f"{out.ename}: {out.evalue}"
            elif out.output_type == "stream" and out.name == "stderr":
                messages[grade_id] = f"stderr output (scored 0): {out.text.strip()[:200]}"
    return messages
