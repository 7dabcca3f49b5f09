"""The transpose ladder autograded by nbgrader on a real GPU: a correct-but-slow submission, and one that forges
`score` and the timers (reference, stub and known-wrong: tests/gpu/test_tracks_nbgrader_gpu.py).

Each score cell grades one kernel in its own child process. The timing budget per kernel is
``WORKSHOP_PERF_BUDGET_S`` (default here 1.5 s, not the spec's 10 s), so the two submissions (10 gradings)
take a few minutes on an H200. Records seconds per submission and the scores under
benchmarks/results/transpose/ (and in $OUT, when set).
"""
from __future__ import annotations

import os

import pytest
from transpose_cells import SPEC, slow_source

from workshop import submissions
from workshop.course import Autograding, Course
from workshop.records import write_gpu_record

pytestmark = pytest.mark.gpu
FULL = {f"{kid}_score": k.points for kid, k in SPEC.kernels.items()}
SLOW_PARTS = ("tiled", "padded", "best")


@pytest.fixture(scope="module")
def grading(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        # a score cell: child start (torch, CUDA), compile, checks, the timing budget, checks again
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
        grading = Autograding(Course(tmp_path_factory.mktemp("transpose-gpu-course"), "transpose"))
        yield grading
        write_gpu_record(
            "transpose-nbgrader-gpu",
            "nbgrader autograde of the transpose ladder (5 kernels, each graded in a GPU child), "
            "one submission at a time",
            {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
             "targets_in_spec": SPEC.targets, "seconds_per_submission": grading.seconds,
             "scores": {s: {"total": f"{sum(v.values()):g}/{sum(FULL.values()):g}", "cells": v}
                        for s, v in grading.scores.items()}},
            dists=("nbgrader",), folder="transpose")


def test_correct_but_slow_gets_correctness_and_partial_speed_points(grading):
    answers = submissions.cuda_answers("transpose", {kid: slow_source(kid) for kid in SLOW_PARTS})
    scores = grading.grade("slow", answers)
    for kid in SLOW_PARTS:
        kernel = SPEC.kernel(kid)
        assert kernel.points_correct <= scores[f"{kid}_score"] < kernel.points, (kid, scores)
    for kid in ("copy", "naive"):   # the reference kernels, handed in unchanged
        assert scores[f"{kid}_score"] == SPEC.kernel(kid).points
    correctness = sum(k.points_correct for k in SPEC.kernels.values())
    assert correctness < sum(scores.values()) < sum(FULL.values())


HOSTILE_COPY_CELL = '''
import time

import graders.cuda_engine.grade
import torch

def score(*args, **kwargs):        # what a hidden test cell in this notebook would call
    return 3.0

graders.cuda_engine.grade.score = score
graders.cuda_engine.grade.grade_kernel = lambda *a, **k: {"status": "ok", "score": {"total": 3.0}}
torch.cuda.Event.elapsed_time = lambda self, end: 1e-6    # a timer that says every kernel is instant
time.perf_counter = lambda: 0.0
'''


def test_a_notebook_that_forges_score_and_the_timers_earns_its_honest_points(grading):
    """``score`` redefined and the timers patched in the notebook: the trusted grader runs neither."""
    answers = submissions.cuda_answers("transpose", {
        "padded": slow_source("padded"),
        "naive": 'extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols) {}'})
    answers["copy"] += "\n" + HOSTILE_COPY_CELL
    scores = grading.grade("forger", answers)
    assert scores["copy_score"] == FULL["copy_score"] and scores["tiled_score"] == FULL["tiled_score"]
    assert scores["naive_score"] == 0
    padded = SPEC.kernel("padded")
    assert padded.points_correct <= scores["padded_score"] < padded.points
