"""The puzzles track graded by nbgrader on a real GPU: correctness on the GPU, access counts on the simulator.

Records seconds per submission and the scores under benchmarks/results/ (and $OUT, when set).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
from importlib import metadata
from pathlib import Path

import pytest

import puzzles
from graders.gpu import detect_gpu
from nbgrader_course import Course, all_mistakes
from workshop import submissions

pytestmark = pytest.mark.gpu
TOTAL = 3 * len(puzzles.PUZZLES)
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
timings: dict[str, float] = {}
totals: dict[str, float] = {}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    # Real limits, not the short ones of the CPU tests: a GPU child pays CUDA start-up and numba compiles.
    os.environ.update(WORKSHOP_KERNEL_TIMEOUT="20", WORKSHOP_CELL_TIMEOUT="90", WORKSHOP_TARGET="gpu")
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    yield Course(tmp_path_factory.mktemp("gpu-course"))
    _record()


def _grade(course: Course, student: str, answers: dict[str, str]) -> dict[str, float]:
    course.submit(student, answers)
    timings[student] = round(course.autograde(student), 1)
    scores = course.scores(student)
    totals[student] = sum(scores.values())
    return scores


def test_reference_gets_full_marks_on_the_gpu(course):
    scores = _grade(course, "reference", submissions.reference_answers())
    outputs = "\n".join(o.get("text", "") for c in course.autograded("reference").cells
                        for o in c.get("outputs", []))
    assert sum(scores.values()) == TOTAL, scores
    assert "run on the GPU" in outputs


def test_stub_gets_zero_on_the_gpu(course):
    assert sum(_grade(course, "stub", {}).values()) == 0


def test_each_mistake_costs_its_own_points_on_the_gpu(course):
    answers, expected = all_mistakes()
    # the cell-level hang is nbgrader's own timeout, covered on the CPU; keep the reference cell here
    answers["prefix_sum"] = submissions.reference_answers()["prefix_sum"]
    expected = {k: v for k, v in expected.items() if not k.startswith("prefix_sum")}
    scores = _grade(course, "mistakes", answers)
    wrong = {cell: score for cell, score in scores.items()
             if score != expected.get(cell, 2 if cell.endswith("_correct") else 1)}
    assert not wrong


def _record() -> None:
    gpu = detect_gpu()
    versions = {d: metadata.version(d) for d in ("numba", "numba-cuda", "numpy", "nbgrader")}
    record = {
        "what": "nbgrader autograde of the puzzles track, one submission at a time",
        "gpu": gpu.name if gpu else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "versions": versions,
        "seconds_per_submission": timings,
        "scores": {s: f"{t:g}/{TOTAL}" for s, t in totals.items()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"puzzles-nbgrader-gpu-{datetime.date.today()}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    if os.environ.get("OUT"):
        shutil.copy(path, os.environ["OUT"])
    print(json.dumps(record, indent=2))
