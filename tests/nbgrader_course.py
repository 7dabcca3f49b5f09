"""A scratch nbgrader course with the puzzles assignment released, shared by the pipeline tests."""
from __future__ import annotations

from pathlib import Path

import nbformat

from gradebook.summary import cell_scores
from workshop import course as nbg
from workshop import submissions
from workshop.cells import read_cells, read_expectations

WRONG_DIR = submissions.PUZZLE_SOLUTIONS / "wrong"


def all_mistakes() -> tuple[dict[str, str], dict[str, float]]:
    """Every known-wrong cell at once (each on its own puzzle) and the score each test cell should get."""
    answers, expected = submissions.reference_answers(), {}
    for path in sorted(WRONG_DIR.glob("*.py")):
        answers.update(read_cells(path))
        expected.update(read_expectations(path))
    return answers, expected


class Course:
    def __init__(self, root: Path, assignment: str = "puzzles"):
        self.root, self.assignment = nbg.make_course(root, [assignment]), assignment
        self.release = nbg.release(self.root, assignment)

    def submit(self, student: str, answers: dict[str, str]) -> Path:
        nbg.add_student(self.root, student, student.title(), "Test")
        return submissions.write(self.root, student, self.assignment, submissions.fill(self.release, answers))

    def autograde(self, student: str) -> float:
        return nbg.autograde(self.root, self.assignment, student)

    def scores(self, student: str) -> dict[str, float]:
        table = cell_scores(f"sqlite:///{self.root / 'gradebook.db'}", self.assignment)
        rows = table[table.student == student]
        return dict(zip(rows.cell, rows.score))

    def autograded(self, student: str) -> nbformat.NotebookNode:
        path = self.root / "autograded" / student / self.assignment / f"{self.assignment}.ipynb"
        return nbformat.read(str(path), as_version=4)


class Autograding:
    """Submissions to one course, autograded one at a time: the seconds each took and its per-cell scores."""

    def __init__(self, course: Course):
        self.course = course
        self.seconds: dict[str, float] = {}
        self.scores: dict[str, dict[str, float]] = {}

    def grade(self, student: str, answers: dict[str, str]) -> dict[str, float]:
        self.course.submit(student, answers)
        self.seconds[student] = round(self.course.autograde(student), 1)   # raises if nbgrader fails
        self.scores[student] = scores = self.course.scores(student)
        print(f"\n{student}: {self.seconds[student]} s, {scores}")
        return scores

    def test_cell_outputs(self, student: str) -> dict[str, list]:
        """The outputs of each graded cell of the student's autograded notebook, by grade_id."""
        nb = self.course.autograded(student)
        return {c.metadata["nbgrader"]["grade_id"]: c.get("outputs", []) for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade")}


def stderr_text(outputs: list) -> str:
    """What a cell wrote to stderr (nbgrader scores a test cell with any stderr output as 0)."""
    return "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
