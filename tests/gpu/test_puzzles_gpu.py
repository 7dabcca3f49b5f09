"""The puzzles track graded by nbgrader on a real GPU: correctness on the GPU, access counts on the simulator.

Records seconds per submission and the scores under benchmarks/results/puzzles/ (and $OUT, when set).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from nbgrader_course import all_mistakes, unmet

from graders.numba_engine import catalogue
from graders.tracks import expected_points
from workshop import submissions
from workshop.cells import read_cells
from workshop.course import Autograding, Course
from workshop.records import write_gpu_record

pytestmark = pytest.mark.gpu
TOTAL = 3 * len(catalogue.PUZZLES)


@pytest.fixture(scope="module")
def grading(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        # Real limits, not the short ones of the CPU tests: a GPU child pays CUDA start-up and numba compiles.
        env.setenv("WORKSHOP_KERNEL_TIMEOUT", "20")
        env.setenv("WORKSHOP_CELL_TIMEOUT", "90")
        env.setenv("WORKSHOP_TARGET", "gpu")
        env.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
        grading = Autograding(Course(tmp_path_factory.mktemp("gpu-course")))
        yield grading
        write_gpu_record(
            "puzzles-nbgrader-gpu", "nbgrader autograde of the puzzles track, one submission at a time",
            {"seconds_per_submission": grading.seconds,
             "scores": {s: f"{sum(v.values()):g}/{TOTAL}" for s, v in grading.scores.items()}},
            dists=("numba", "numba-cuda", "nbgrader"), folder="puzzles")


def test_reference_gets_full_marks_on_the_gpu(grading):
    scores = grading.grade("reference", submissions.reference_answers())
    outputs = "\n".join(o.get("text", "") for c in grading.course.autograded("reference").cells
                        for o in c.get("outputs", []))
    assert sum(scores.values()) == TOTAL, scores
    assert "run on the GPU" in outputs


def test_stub_gets_zero_on_the_gpu(grading):
    assert sum(grading.grade("stub", {}).values()) == 0


def test_each_mistake_costs_its_own_points_on_the_gpu(grading):
    answers, expected = all_mistakes()
    # the cell-level hang is nbgrader's own timeout, covered on the CPU; keep the reference cell here
    answers["prefix_sum"] = submissions.reference_answers()["prefix_sum"]
    expected = {k: v for k, v in expected.items() if not k.startswith("prefix_sum")}
    scores = grading.grade("mistakes", answers)
    assert not unmet(scores, expected)


def test_racy_kernels_that_the_gpu_gets_right_by_chance_lose_their_points(grading):
    answers, expected = all_mistakes("racy")
    scores = grading.grade("racy", answers)
    assert not unmet(scores, expected), scores


def test_accesses_moved_into_print_count_on_a_gpu_worker(grading):
    """The attack file's kernels are correct on the GPU (a print with a walrus, an atomic or a device function
    compiles there) and over their access limits, counted in the simulator, a print's accesses included."""
    attack = Path(__file__).parents[1] / "e2e" / "attacks" / "run" / "print_smuggle.py"
    scores = grading.grade("print-smuggle", submissions.reference_answers() | read_cells(attack))
    assert not unmet(scores, expected_points(attack)), scores
