"""Drive nbgrader's own CLI in a course directory (the repository root, or a scratch copy of it); `Course`
is a scratch course that submissions are saved to, autograded in and scored from."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from nbgrader.utils import is_grade

from graders.settings import ROOT
from workshop import submissions


def nbgrader_env() -> dict[str, str]:
    """nbgrader runs the ``alembic`` script to create a gradebook: this interpreter's bin goes on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course``; on failure (with ``check``) raise with nbgrader's own log."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc


def make_course(dest: Path, assignments: list[str]) -> Path:
    """A scratch course directory: this repo's nbgrader config and the named source assignments."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    for name in assignments:
        shutil.copytree(ROOT / "assignments" / name, dest / "assignments" / name, dirs_exist_ok=True)
    return dest


def add_student(course: Path, student: str, first: str, last: str) -> None:
    nbgrader(course, "db", "student", "add", student, f"--first-name={first}", f"--last-name={last}")


def release(course: Path, assignment: str):
    """``nbgrader generate_assignment``; returns the released (student) notebook."""
    import nbformat
    nbgrader(course, "generate_assignment", assignment, "--force")
    return nbformat.read(str(course / "release" / assignment / f"{assignment}.ipynb"), as_version=4)


def autograde(course: Path, assignment: str, student: str) -> float:
    """``nbgrader autograde`` one student's submission; returns the seconds it took."""
    return autograde_logged(course, assignment, student)[0]


def autograde_logged(course: Path, assignment: str, student: str) -> tuple[float, str]:
    """``nbgrader autograde`` one student's submission: the seconds it took and nbgrader's log."""
    start = time.monotonic()
    proc = nbgrader(course, "autograde", assignment, f"--student={student}", "--force")
    return time.monotonic() - start, proc.stdout + proc.stderr


class Course:
    """A scratch course directory with one assignment released: submit notebooks, autograde them, read the
    gradebook (tests and benchmarks grade through it exactly as the course does)."""

    def __init__(self, root: Path, assignment: str = "puzzles"):
        self.root, self.assignment = make_course(root, [assignment]), assignment
        self.release = release(self.root, assignment)

    def submit(self, student: str, answers: dict[str, str]) -> Path:
        """Add ``student`` and save the released notebook with ``answers`` (solution cells by grade_id)."""
        add_student(self.root, student, student.title(), "Test")
        return submissions.write(self.root, student, self.assignment, submissions.fill(self.release, answers))

    def autograde(self, student: str) -> float:
        return autograde(self.root, self.assignment, student)

    def autograde_logged(self, student: str) -> tuple[float, str]:
        return autograde_logged(self.root, self.assignment, student)

    def scores(self, student: str) -> dict[str, float]:
        """The student's points per graded cell, by grade_id, from the gradebook."""
        from gradebook.summary import cell_scores
        table = cell_scores(f"sqlite:///{self.root / 'gradebook.db'}", self.assignment)
        rows = table[table.student == student]
        return dict(zip(rows.cell, rows.score))

    def autograded(self, student: str):
        """The student's autograded notebook (an nbformat NotebookNode)."""
        import nbformat
        path = self.root / "autograded" / student / self.assignment / f"{self.assignment}.ipynb"
        return nbformat.read(str(path), as_version=4)


class Autograding:
    """Submissions to one course, autograded one at a time: the seconds each took, its per-cell scores and
    nbgrader's log."""

    def __init__(self, course: Course):
        self.course = course
        self.seconds: dict[str, float] = {}
        self.scores: dict[str, dict[str, float]] = {}
        self.logs: dict[str, str] = {}

    def grade(self, student: str, answers: dict[str, str]) -> dict[str, float]:
        self.course.submit(student, answers)
        seconds, self.logs[student] = self.course.autograde_logged(student)   # raises if nbgrader fails
        self.seconds[student] = round(seconds, 1)
        self.scores[student] = scores = self.course.scores(student)
        print(f"\n{student}: {self.seconds[student]} s, {scores}")
        return scores

    def test_cell_outputs(self, student: str) -> dict[str, list]:
        """The outputs of each graded cell of the student's autograded notebook, by grade_id."""
        nb = self.course.autograded(student)
        return {c.metadata.nbgrader["grade_id"]: c.get("outputs", []) for c in nb.cells if is_grade(c)}


def stderr_text(outputs: list) -> str:
    """What a cell wrote to stderr (nbgrader scores a test cell with any stderr output as 0)."""
    return "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
