"""The GEMM worklog autograded by nbgrader on a real GPU: reference, untouched stub, correct-but-slow.

Each score cell grades one kernel in its own child process (cuBLAS timed in the same child); the structural
cells compile and read the SASS. The timing budget per kernel is ``WORKSHOP_PERF_BUDGET_S`` (default here
1.0 s, not the spec's 4 s). The slow student hands in only the warp-tiling cell, holding kernel 6
(tracks/gemm/solutions/wrong/slow_warptiling.cu), and leaves the rest as released. Records seconds per submission
and the scores under benchmarks/results/ (and in $OUT, when set).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from graders import tracks
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.structure import load_structure
from workshop import submissions
from workshop.course import Autograding, Course, stderr_text
from workshop.records import write_gpu_record

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec("gemm")
STRUCTURE = load_structure("gemm")
FULL = ({f"{kid}_score": k.points for kid, k in SPEC.kernels.items()}
        | {cid: c.points for cid, c in STRUCTURE.checks.items()}
        | {STRUCTURE.autotune.check_id: STRUCTURE.autotune.points})
SLOW = ROOT / "tracks/gemm/solutions/wrong/slow_warptiling.cu"


@pytest.fixture(scope="module")
def grading(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.0")
        grading = Autograding(Course(tmp_path_factory.mktemp("gemm-gpu-course"), "gemm"))
        yield grading
        total = sum(FULL.values())
        write_gpu_record(
            "gemm-nbgrader-gpu",
            "nbgrader autograde of the GEMM worklog (10 kernels, each graded in a GPU child, 3 SASS checks, "
            "the autotuning search), one submission at a time; 'slow' hands in only the warp-tiling cell",
            {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
             "targets_in_spec": SPEC.targets, "seconds_per_submission": grading.seconds,
             "scores": {s: {"total": f"{sum(v.values()):g}/{total:g}", "cells": v} for s, v in grading.scores.items()}},
            dists=("nbgrader",))


def test_reference_gets_full_marks(grading):
    scores = grading.grade("reference", submissions.gemm_answers())
    for grade_id, outputs in grading.test_cell_outputs("reference").items():
        print(f"--- {grade_id}\n" + "".join(o.get("text", "") for o in outputs))
        assert not stderr_text(outputs), (grade_id, stderr_text(outputs))
    assert scores == FULL, {k: (scores.get(k), v) for k, v in FULL.items() if scores.get(k) != v}


def test_untouched_stub_gets_zero_without_crashing(grading):
    scores = grading.grade("stub", {})
    assert scores == {cell: 0 for cell in FULL}
    for grade_id, outputs in grading.test_cell_outputs("stub").items():
        assert not stderr_text(outputs), (grade_id, stderr_text(outputs))
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert errors, (grade_id, outputs)


def test_correct_but_slow_gets_correctness_and_partial_speed_points(grading):
    scores = grading.grade("slow", {"warptiling": submissions.gemm_answers({"warptiling": SLOW.read_text()})["warptiling"]})
    expected = tracks.expected_points(SLOW)   # its own cells; every other cell is the untouched stub's
    assert not {cell: score for cell, score in scores.items()
                if not (expected[cell].matches(score) if cell in expected else score == 0)}, scores
    outputs = grading.test_cell_outputs("slow")["warptiling_score"]
    print("".join(o.get("text", "") for o in outputs))
    assert not stderr_text(outputs)
