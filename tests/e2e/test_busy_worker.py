"""nbgrader autograde of the puzzles reference on a worker too busy to run its grading children in their time: full
marks once the starved children ran again with a longer limit, or the submission refused with the worker's fault in
the log and nothing recorded; never a 0 (`graders.sandbox.starvation`)."""
from __future__ import annotations

import re

import pytest
from busy_cpu import busy_cpu, on_cpu
from nbgrader.api import Gradebook
from nbgrader_course import CourseCopy

from graders.autograde import graded_cells, stored_results
from graders.numba_engine import catalogue
from workshop import submissions
from workshop.course import nbgrader

pytestmark = pytest.mark.slow


def test_a_busy_worker_never_records_a_zero(released, tmp_path, monkeypatch):
    """The whole grading on one CPU beside six busy processes, every puzzle's grading child at once
    (``StartTrustedGrading.workers``): each gets about a twentieth of the CPU (a quarter of a second of CPU in its 5 s
    limit), and its first run passes the limit; an honest child needs under 2 s of CPU."""
    monkeypatch.setenv("WORKSHOP_KERNEL_TIMEOUT", "5")
    course = CourseCopy(released["puzzles"], tmp_path / "course")
    course.submit("reference", submissions.reference_answers())
    with busy_cpu(4) as cpu:
        done = on_cpu(cpu, lambda: nbgrader(course.root, "autograde", "puzzles", "--student=reference", "--force",
                                            f"--StartTrustedGrading.workers={len(catalogue.PUZZLES)}", check=False))
    log = done.stdout + done.stderr
    if done.returncode == 0:
        assert sum(course.scores("reference").values()) == 3 * len(catalogue.PUZZLES), log
        reruns = [r["rerun"] for cell in graded_cells(course.autograded("reference")) for r in stored_results(cell)
                  if r.get("rerun")]
        assert reruns and all(r.startswith("the worker was too busy during a first run: stopped after ") for r in reruns)
    else:   # refused: one line for the TA, and not a score in the gradebook (nbgrader added it, ungraded)
        assert re.search(r"ERROR\] \w+_(correct|limits): the worker was too busy to run a grading child whose limit "
                         r"is 5 s: .*Nothing was graded or recorded", log), log
        with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", "kernel-workshop") as gradebook:
            submission = gradebook.find_submission("puzzles", "reference")
            assert {grade.auto_score for notebook in submission.notebooks for grade in notebook.grades} == {None}
