"""The GEMM worklog autograded by nbgrader on a real GPU: reference, untouched stub, correct-but-slow.

Each score cell grades one kernel in its own child process (cuBLAS timed in the same child); the structural
cells compile and read the SASS. The timing budget per kernel is ``WORKSHOP_PERF_BUDGET_S`` (default here
1.0 s, not the spec's 4 s). The slow student hands in only the warp-tiling cell, holding kernel 6
(solutions/gemm/wrong/slow_warptiling.cu), and leaves the rest as released. Records seconds per submission
and the scores under benchmarks/results/ (and in $OUT, when set).
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
from graders.kernel_spec import load_spec
from graders.structure import load_structure
from nbgrader_course import Course
from workshop import submissions

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SPEC = load_spec("gemm")
STRUCTURE = load_structure("gemm")
FULL = ({f"{kid}_score": k.points for kid, k in SPEC.kernels.items()}
        | {cid: c.points for cid, c in STRUCTURE.checks.items()}
        | {STRUCTURE.autotune.check_id: STRUCTURE.autotune.points})
SLOW = ROOT / "solutions/gemm/wrong/slow_warptiling.cu"
timings: dict[str, float] = {}
scores_of: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("WORKSHOP_CELL_TIMEOUT", "WORKSHOP_PERF_BUDGET_S")}
    os.environ["WORKSHOP_CELL_TIMEOUT"] = "150"
    os.environ["WORKSHOP_PERF_BUDGET_S"] = saved["WORKSHOP_PERF_BUDGET_S"] or "1.0"
    yield Course(tmp_path_factory.mktemp("gemm-gpu-course"), "gemm")
    _record()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _grade(course: Course, student: str, answers: dict[str, str]) -> dict[str, float]:
    course.submit(student, answers)
    timings[student] = round(course.autograde(student), 1)   # raises if nbgrader fails
    scores_of[student] = scores = course.scores(student)
    print(f"\n{student}: {timings[student]} s, {scores}")
    return scores


def _graded_outputs(course: Course, student: str) -> dict[str, list]:
    nb = course.autograded(student)
    return {c.metadata["nbgrader"]["grade_id"]: c.get("outputs", []) for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade")}


def _stderr(outputs: list) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")


def test_reference_gets_full_marks(course):
    scores = _grade(course, "reference", submissions.gemm_answers())
    for grade_id, outputs in _graded_outputs(course, "reference").items():
        print(f"--- {grade_id}\n" + "".join(o.get("text", "") for o in outputs))
        assert not _stderr(outputs), (grade_id, _stderr(outputs))
    assert scores == FULL, {k: (scores.get(k), v) for k, v in FULL.items() if scores.get(k) != v}


def test_untouched_stub_gets_zero_without_crashing(course):
    scores = _grade(course, "stub", {})
    assert scores == {cell: 0 for cell in FULL}
    for grade_id, outputs in _graded_outputs(course, "stub").items():
        assert not _stderr(outputs), (grade_id, _stderr(outputs))
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert errors, (grade_id, outputs)


def test_correct_but_slow_gets_correctness_and_partial_speed_points(course):
    scores = _grade(course, "slow", {"warptiling": submissions.gemm_answers({"warptiling": SLOW.read_text()})["warptiling"]})
    kernel = SPEC.kernel("warptiling")
    assert kernel.points_correct < scores["warptiling_score"] < kernel.points, scores
    outputs = _graded_outputs(course, "slow")["warptiling_score"]
    print("".join(o.get("text", "") for o in outputs))
    assert not _stderr(outputs)


def _record() -> None:
    gpu = detect_gpu()
    versions = {}
    for dist in ("nbgrader", "numpy", "torch", "cuda-core", "cuda-bindings", "nvidia-cuda-nvrtc"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    try:
        from cuda.bindings import nvrtc
        versions["nvrtc (loaded)"] = ".".join(map(str, nvrtc.nvrtcVersion()[1:]))
    except Exception as exc:   # the record is still worth writing
        versions["nvrtc (loaded)"] = f"unknown: {exc}"
    record = {
        "what": "nbgrader autograde of the GEMM worklog (10 kernels, each graded in a GPU child, 3 SASS checks, "
                "the autotuning search), one submission at a time; 'slow' hands in only the warp-tiling cell",
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
    path = RESULTS / f"gemm-nbgrader-gpu-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    if os.environ.get("OUT"):
        shutil.copy(path, os.environ["OUT"])
    print(json.dumps(record, indent=2))
