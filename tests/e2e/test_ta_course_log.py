"""What a TA sees running nbgrader in this course: logs without warnings they cannot act on, a warning only
for a test cell a student changed, and release/collect through the course's own exchange (real CLI)."""
from __future__ import annotations

import getpass
import re

import nbformat
import pytest

from gradebook.summary import cell_scores
from graders.numba_engine import catalogue
from workshop import course as nbg
from workshop import submissions

pytestmark = pytest.mark.slow
COURSE_ID = "kernel-workshop"
# nbgrader's and SQLAlchemy's warnings, Python's, and ipykernel's banner for a kernel started by hand
NOISE = re.compile(r"WARNING|Warning|not recognized|NOTE: When using the `ipython kernel`")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return nbg.make_course(tmp_path_factory.mktemp("ta-course"), ["puzzles"])


def _log(proc) -> str:
    return proc.stdout + proc.stderr


def _submit(course, student: str, nb) -> None:
    nbg.add_student(course, student, student.title(), "Test")
    submissions.write(course, student, "puzzles", nb)


def _scores(course, student: str) -> dict[str, float]:
    table = cell_scores(f"sqlite:///{course / 'gradebook.db'}", "puzzles")
    rows = table[table.student == student]
    return dict(zip(rows.cell, rows.score))


@pytest.fixture(scope="module")
def release(course):
    log = _log(nbg.nbgrader(course, "generate_assignment", "puzzles"))
    assert not NOISE.search(log), log
    return nbformat.read(str(course / "release" / "puzzles" / "puzzles.ipynb"), as_version=4)


def test_generate_and_autograde_log_no_warnings(course, release):
    _submit(course, "ada", submissions.fill(release, submissions.reference_answers()))
    log = _log(nbg.nbgrader(course, "autograde", "puzzles", "--student=ada"))
    assert not NOISE.search(log), log
    assert "Writing" in log and "autograded/ada/puzzles" in log
    # the submission nbgrader created while SQLAlchemy's warning is filtered is complete in the gradebook
    scores = _scores(course, "ada")
    assert len(scores) == 2 * len(catalogue.PUZZLES) and sum(scores.values()) == 3 * len(catalogue.PUZZLES)


def test_a_changed_test_cell_is_still_reported_and_restored(course, release):
    nb = submissions.fill(release, submissions.reference_answers())
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "map_correct")
    cell.source += "\nprint('I changed a read-only cell')"
    _submit(course, "eve", nb)
    log = _log(nbg.nbgrader(course, "autograde", "puzzles", "--student=eve"))
    warnings = [line for line in log.splitlines() if NOISE.search(line)]
    assert len(warnings) == 1 and "Attribute 'checksum' for cell map_correct has changed" in warnings[0], log
    autograded = nbformat.read(str(course / "autograded" / "eve" / "puzzles" / "puzzles.ipynb"), as_version=4)
    assert "I changed a read-only cell" not in "\n".join(c.source for c in autograded.cells)
    assert sum(_scores(course, "eve").values()) == 3 * len(catalogue.PUZZLES)


def test_release_fetch_submit_collect_through_the_course_exchange(course, release, tmp_path):
    exchange = course / "exchange"
    assert exchange.is_dir()   # made by nbgrader_config.py: formgrader finds it
    log = _log(nbg.nbgrader(course, "release_assignment", "puzzles"))
    assert f"Released as: {COURSE_ID} puzzles" in log and not NOISE.search(log), log
    student_side = [f"--course={COURSE_ID}", f"--Exchange.root={exchange}"]
    nbg.nbgrader(tmp_path, "fetch_assignment", "puzzles", *student_side)
    fetched = nbformat.read(str(tmp_path / "puzzles" / "puzzles.ipynb"), as_version=4)
    assert fetched.cells == release.cells
    nbg.nbgrader(tmp_path, "submit", "puzzles", *student_side)
    log = _log(nbg.nbgrader(course, "collect", "puzzles"))
    assert "Collecting submission" in log and not NOISE.search(log), log
    collected = course / "submitted" / getpass.getuser() / "puzzles" / "puzzles.ipynb"
    assert nbformat.read(str(collected), as_version=4).cells == release.cells
