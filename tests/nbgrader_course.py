"""Every known-wrong puzzle cell in one submission, and the check of its scores, for the tests that autograde
puzzles notebooks with nbgrader; a copy of a scratch course, for tests that start from one made once."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from graders import tracks
from graders.tracks import Expectation, expected_points
from workshop import submissions
from workshop.cells import read_cells
from workshop.course import Course
from workshop.fleet.coordinator import course_config

_SPEC = tracks.get("puzzles").assignment
FULL_MARKS = {"correct": float(_SPEC["points_correct"]), "limits": float(_SPEC["points_limits"])}


def all_mistakes(folder: str = "wrong") -> tuple[dict[str, str], dict[str, Expectation]]:
    """Every known-wrong cell of ``folder`` (``wrong``; ``racy``: right on a GPU by chance) at once, each on its
    own puzzle, and the points their test cells must get."""
    answers, expected = submissions.reference_answers(), {}
    for path in sorted((submissions.PUZZLE_SOLUTIONS / folder).glob("*.py")):
        answers.update(read_cells(path))
        expected.update(expected_points(path))
    return answers, expected


def unmet(scores: dict[str, float], expected: dict[str, Expectation]) -> dict[str, float]:
    """The test cells whose score breaks ``expected``; a cell ``expected`` does not name must get full marks."""
    def ok(cell: str, score: float) -> bool:
        if cell in expected:
            return expected[cell].matches(score)
        return score == FULL_MARKS[cell.rsplit("_", 1)[1]]
    return {cell: score for cell, score in scores.items() if not ok(cell, score)}

# the submissions the shared graded course (tests/e2e/conftest.py) holds, autograded: student -> answers
GRADED = {"reference": submissions.reference_answers(), "stub": {}}


class CourseCopy(Course):
    """A copy of the course directory ``source`` in ``root`` (its files and gradebook: generated assignments,
    students, submissions, grades), to submit ``assignment`` to and autograde in as in the original."""

    def __init__(self, source: Path, root: Path, assignment: str = "puzzles"):
        shutil.copytree(source, root, symlinks=True)
        self.root, self.assignment = root, assignment
        self.release = nbformat.read(str(root / "release" / assignment / f"{assignment}.ipynb"), as_version=4)

    def add_student(self, student: str, first: str, last: str) -> None:
        """What `nbgrader db student add` runs (nbgrader's `Gradebook`), here rather than in a process of its own."""
        course_id = course_config(self.root).CourseDirectory.course_id
        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}", course_id) as gb:
            gb.update_or_create_student(student, first_name=first, last_name=last, email=None, lms_user_id=None)
            gb.engine.dispose()

    def submit(self, student: str, answers: dict[str, str]) -> Path:
        """`Course.submit`, the student added by `add_student`."""
        self.add_student(student, student.title(), "Test")
        return submissions.write(self.root, student, self.assignment, submissions.fill(self.release, answers))
