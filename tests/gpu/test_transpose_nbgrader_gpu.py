"""The transpose ladder autograded by nbgrader on a real GPU: reference, untouched stub, correct-but-slow.

Each score cell grades one kernel in its own child process. The timing budget per kernel is
``WORKSHOP_PERF_BUDGET_S`` (default here 1.5 s, not the spec's 10 s), so the three submissions (15 gradings)
take a few minutes on an H200. Records seconds per submission and the scores under benchmarks/results/
(and in $OUT, when set).
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

from graders.gpu import detect_gpu
from nbgrader_course import Course
from transpose_cells import SPEC, slow_source
from workshop import submissions

pytestmark = pytest.mark.gpu
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FULL = {f"{kid}_score": k.points for kid, k in SPEC.kernels.items()}
SLOW_PARTS = ("tiled", "padded", "best")
timings: dict[str, float] = {}
scores_of: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("WORKSHOP_CELL_TIMEOUT", "WORKSHOP_PERF_BUDGET_S")}
    # a score cell: child start (torch, CUDA), compile, checks, the timing budget, checks again
    os.environ["WORKSHOP_CELL_TIMEOUT"] = "150"
    os.environ["WORKSHOP_PERF_BUDGET_S"] = saved["WORKSHOP_PERF_BUDGET_S"] or "1.5"
    yield Course(tmp_path_factory.mktemp("transpose-gpu-course"), "transpose")
    _record()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _grade(course: Course, student: str, answers: dict[str, str]) -> dict[str, float]:
    course.submit(student, answers)
    timings[student] = round(course.autograde(student), 1)   # raises if nbgrader fails
    scores = course.scores(student)
    scores_of[student] = scores
    print(f"\n{student}: {timings[student]} s, {scores}")
    return scores


def _score_cells(course: Course, student: str) -> dict[str, list]:
    nb = course.autograded(student)
    return {c.metadata["nbgrader"]["grade_id"]: c.get("outputs", []) for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade")}


def _stderr(outputs: list) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")


def test_reference_gets_full_marks(course):
    scores = _grade(course, "reference", submissions.transpose_answers())
    cells = _score_cells(course, "reference")
    for grade_id, outputs in cells.items():
        text = "".join(o.get("text", "") for o in outputs)
        print(f"--- {grade_id}\n{text}")
        assert not _stderr(outputs), (grade_id, _stderr(outputs))
        assert "points:" in text, grade_id
    assert scores == FULL, {k: (scores.get(k), v) for k, v in FULL.items() if scores.get(k) != v}


def test_untouched_stub_gets_zero_without_crashing(course):
    scores = _grade(course, "stub", {})
    assert scores == {cell: 0 for cell in FULL}
    for grade_id, outputs in _score_cells(course, "stub").items():
        assert not _stderr(outputs), (grade_id, _stderr(outputs))
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert errors and "compile_error" in errors[0]["evalue"], (grade_id, outputs)


def test_correct_but_slow_gets_correctness_and_partial_speed_points(course):
    answers = submissions.transpose_answers({kid: slow_source(kid) for kid in SLOW_PARTS})
    scores = _grade(course, "slow", answers)
    for kid in SLOW_PARTS:
        kernel = SPEC.kernel(kid)
        assert kernel.points_correct <= scores[f"{kid}_score"] < kernel.points, (kid, scores)
    for kid in ("copy", "naive"):   # the reference kernels, handed in unchanged
        assert scores[f"{kid}_score"] == SPEC.kernel(kid).points
    correctness = sum(k.points_correct for k in SPEC.kernels.values())
    assert correctness < sum(scores.values()) < sum(FULL.values())


def _record() -> None:
    gpu = detect_gpu()
    versions = {}
    for dist in ("nbgrader", "numpy", "torch", "cuda-core", "cuda-bindings", "nvidia-cuda-nvrtc"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    record = {
        "what": "nbgrader autograde of the transpose ladder (5 kernels, each graded in a GPU child), "
                "one submission at a time",
        "gpu": gpu.name if gpu else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "versions": versions,
        "perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
        "targets_in_spec": SPEC.targets,
        "seconds_per_submission": timings,
        "scores": {s: {"total": f"{sum(v.values()):g}/{sum(FULL.values()):g}", "cells": v}
                   for s, v in scores_of.items()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"transpose-nbgrader-gpu-{datetime.date.today()}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    if os.environ.get("OUT"):
        shutil.copy(path, os.environ["OUT"])
    print(json.dumps(record, indent=2))
