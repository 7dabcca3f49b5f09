"""Write audit results into the nbgrader gradebook as manual scores (which nbgrader ranks above auto ones)."""
from __future__ import annotations

from nbgrader.api import Gradebook


def recorded_scores(db_url: str, assignment: str, notebook: str, student: str) -> dict[str, tuple[float, float]]:
    """``{grade_id: (score, max_score)}`` of one student's autograded notebook."""
    with Gradebook(db_url) as gb:
        nb = gb.find_submission_notebook(notebook, assignment, student)
        return {g.name: (g.score, g.max_score) for g in nb.grades}


def set_manual_score(db_url: str, assignment: str, notebook: str, student: str, cell: str, score: float) -> None:
    with Gradebook(db_url) as gb:
        grade = gb.find_grade(cell, notebook, assignment, student)
        grade.manual_score = score
        gb.db.commit()
