"""nbgrader end to end on the simulator: release, submit, autograde, export (real CLI, real kernels)."""
from __future__ import annotations

import time

import pandas as pd
import pytest
from nbgrader.utils import is_grade
from nbgrader_course import GRADED, CourseCopy, all_mistakes, unmet

from graders.numba_engine import catalogue
from workshop import course as nbg
from workshop import submissions
from workshop.cells import read_cells

pytestmark = pytest.mark.slow
TOTAL = 3 * len(catalogue.PUZZLES)


@pytest.fixture(scope="module")
def course(graded_puzzles, tmp_path_factory):
    """A course with the reference and the untouched stub autograded (`GRADED`)."""
    return CourseCopy(graded_puzzles, tmp_path_factory.mktemp("pipeline") / "course")


def test_release_has_no_solution_code_and_no_hidden_tests(course):
    text = "\n".join(cell.source for cell in course.release.cells)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    assert "grade_correctness" not in text and "grade_limits" not in text
    for answer in submissions.reference_answers().values():
        body = [line for line in answer.splitlines() if line.startswith("        ")]
        assert not any(line in text.splitlines() for line in body if line.strip())
    assert text.count("raise NotImplementedError()") == len(catalogue.PUZZLES)


def test_reference_gets_full_marks(course):
    assert GRADED["reference"] == submissions.reference_answers()
    scores = course.scores("reference")
    assert len(scores) == 2 * len(catalogue.PUZZLES) and sum(scores.values()) == TOTAL


def test_untouched_stub_gets_zero_without_crashing(course):
    assert GRADED["stub"] == {}
    scores = course.scores("stub")
    assert len(scores) == 2 * len(catalogue.PUZZLES) and sum(scores.values()) == 0


def test_feedback_on_submissions_the_project_placed_is_released(course):
    """`workshop.submissions.write` puts nbgrader's timestamp.txt and submission_secret.txt beside the notebook,
    as `nbgrader collect` does: release_feedback reads both (it raised FileNotFoundError without them)."""
    for command in ("generate_feedback", "release_feedback"):
        done = nbg.nbgrader(course.root, command, "puzzles", "--student=reference")
        assert "Traceback" not in done.stdout + done.stderr and "WARNING" not in done.stdout + done.stderr
    released = list((course.root / "exchange" / "kernel-workshop" / "feedback").glob("*.html"))
    assert len(released) == 1 and "map_correct" in released[0].read_text()


def test_each_mistake_costs_exactly_its_own_points_and_hangs_are_stopped(course, monkeypatch):
    answers, expected = all_mistakes()
    course.submit("mistakes", answers)
    # the hanging cell is interrupted after 10 s (a notebook cell's limit; nbgrader reads it when it starts)
    monkeypatch.setenv("WORKSHOP_CELL_TIMEOUT", "10")
    start = time.monotonic()
    course.autograde("mistakes")
    elapsed = time.monotonic() - start
    scores = course.scores("mistakes")
    assert len(scores) == 2 * len(catalogue.PUZZLES) and not unmet(scores, expected)
    # one kernel hang (WORKSHOP_KERNEL_TIMEOUT) and one cell hang (WORKSHOP_CELL_TIMEOUT) plus the rest
    assert elapsed < 5 + 10 + 90
    outputs = {c.metadata.nbgrader["grade_id"]: c.outputs for c in course.autograded("mistakes").cells if is_grade(c)}
    assert "timeout" in outputs["blocks_correct"][-1]["evalue"]
    pooling = outputs["pooling_limits"][-1]["evalue"]   # over the limits in both hidden cases: each is named
    assert pooling.startswith("Pooling: access limits (hidden, seed ") and "case 1 of 2 (a[8]; " in pooling
    assert "case 2 of 2 (a[5]; " in pooling


def test_unparseable_notebook_is_reported_and_others_still_export(course):
    course.add_student("broken", "Broken", "Test")
    path = course.root / "submitted" / "broken" / "puzzles" / "puzzles.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"cells": [ not json')
    proc = nbg.nbgrader(course.root, "autograde", "puzzles", "--student=broken", check=False)
    assert proc.returncode != 0 and "NotJSONError" in proc.stdout + proc.stderr

    nbg.nbgrader(course.root, "export", "--to=grades.csv")
    grades = pd.read_csv(course.root / "grades.csv").set_index("student_id")
    assert grades.index.is_unique
    assert grades.loc["reference", "score"] == TOTAL and grades.loc["stub", "score"] == 0
    assert grades.loc["broken", "score"] == 0 and grades.loc["reference", "max_score"] == TOTAL


def test_grader_patched_from_a_cell_changes_nothing(course):
    """The hidden tests run in nbgrader's process on the parsed file, not in the notebook a cell can patch."""
    answers = submissions.reference_answers()
    answers.update(read_cells(submissions.PUZZLE_SOLUTIONS / "tampering" / "patch_grader.py"))
    course.submit("tamperer", answers)
    course.autograde("tamperer")
    scores = course.scores("tamperer")
    assert scores["zip_correct"] == scores["zip_limits"] == 0
    assert sum(scores.values()) == TOTAL - 3
