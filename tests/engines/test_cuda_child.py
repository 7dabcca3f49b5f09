"""The perf grader's parent side on a machine without a GPU: refusal, child limits, the child's own timer."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import graders.cuda_engine.timing
from graders import gpu
from graders.gpu import NO_GPU_EXIT, NeedsGPUWorker
from graders.hidden_tests import GRADED_OUTSIDE
from graders.settings import ROOT
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.grade import check_compiles, grade_kernel, report, result_from_child, score
from graders.sandbox.run import ChildResult, run_child

FAKE = "fake_perf_child"
FAKE_ENV = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "perf_fakes"), str(ROOT)])}
NAIVE = (ROOT / "tracks/transpose/solutions/naive.cu").read_text()
SPEC = load_spec("transpose")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    gpu.detect_gpu.cache_clear()
    yield
    gpu.detect_gpu.cache_clear()


def test_detect_gpu_finds_none_on_a_cpu_machine():
    gpu.detect_gpu.cache_clear()
    if gpu.detect_gpu() is not None:
        pytest.skip("this machine has a GPU")
    assert gpu.detect_gpu() is None


def test_grading_without_a_gpu_stops_with_a_clear_message(no_gpu):
    with pytest.raises(NeedsGPUWorker, match="needs a GPU worker"):
        grade_kernel("transpose", "naive", NAIVE)
    with pytest.raises(NeedsGPUWorker, match="needs a GPU worker"):
        score("transpose", "naive", NAIVE)


def test_in_the_notebook_kernel_during_autograde_score_only_says_who_grades():
    """The student's kernel never grades during autograde: the trusted grader does (graders/autograde.py)."""
    code = ("from graders.cuda_engine.grade import score\n"
            "print('returned', score('transpose', 'naive', 'irrelevant'))\n")
    env = {**os.environ, "WORKSHOP_GPU": "0", "NBGRADER_EXECUTION": "autograde", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines() == [GRADED_OUTSIDE, "returned None"]


def test_require_gpu_command_fails_without_a_gpu():
    env = {**os.environ, "WORKSHOP_GPU": "0"}
    done = subprocess.run([sys.executable, "-m", "graders.gpu", "--require"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == NO_GPU_EXIT and "needs a GPU worker" in done.stderr


def test_students_can_compile_check_without_a_gpu(no_gpu, capsys):
    resources = check_compiles("transpose", "naive", NAIVE)
    out, err = capsys.readouterr()
    assert err == ""
    assert "transpose_naive compiles for sm_90" in out and "checked on the GPU worker" in out
    assert resources["transpose_naive"]["registers"] > 0


def test_hanging_child_is_stopped_within_its_limit():
    start = time.monotonic()
    result = run_child(FAKE, {"mode": "hang"}, timeout_s=2, env=FAKE_ENV)
    assert result.status == "timeout" and time.monotonic() - start < 10


def test_crashing_child_is_reported():
    result = run_child(FAKE, {"mode": "crash"}, timeout_s=30, env=FAKE_ENV)
    assert result.status == "crashed" and "SIGABRT" in result.message


@pytest.mark.parametrize("child, status, words", [
    (ChildResult("timeout", seconds=12.0), "timeout", "did not finish within 12 s"),
    (ChildResult("crashed", message="the grading process was killed by SIGSEGV"), "crashed", "SIGSEGV"),
    (ChildResult("ok", answer={"error": "KeyError: 'x'", "traceback": "..."}), "grader_error", "KeyError"),
    (ChildResult("ok", answer={"status": "incorrect", "message": "3 values wrong"}), "incorrect", "3 values"),
])
def test_failures_score_zero(child, status, words):
    result = result_from_child(child, SPEC, SPEC.kernel("padded"), limit_s=12.0, seed=7)
    assert result.status == status and words in result.message
    assert result.points == 0 and result.max_points == 3 and result.details["score"]["total"] == 0
    assert result.failure_line().startswith(f"{status} (hidden, seed 7): ")


def fake_ok_answer(ratio: float) -> dict:
    stats = {"median_s": 1e-3, "mean_s": 1e-3, "rse": 0.001, "samples": 50, "reps": 1, "converged": True}
    return {"status": "ok", "message": "", "timing": {
        "ratio": ratio, "work_unit": "B",
        "kernel": stats | {"throughput": 5.0e11}, "baseline": stats | {"throughput": 4.0e12, "name": "copy"}},
        "compile": {"resources": {"transpose_padded": {"registers": 30, "shared_bytes": 4224, "stack_bytes": 0,
                                                        "spill_stores": 0, "spill_loads": 0}}}}


def test_correct_kernel_scores_on_its_ratio_and_the_report_says_so():
    padded = SPEC.kernel("padded")
    halfway = (padded.floor + padded.target) / 2   # half the speed points
    result = result_from_child(ChildResult("ok", answer=fake_ok_answer(halfway)), SPEC, padded, 10, seed=7)
    assert result.points == pytest.approx(1 + 2 * 0.5) and result.as_dict()["timing"]["ratio"] == halfway
    text = report(result)
    assert f"ratio {halfway:.3f}" in text and "points: 2.00 / 3" in text and "30 registers" in text


def test_parent_side_patches_do_not_reach_the_childs_timer(monkeypatch):
    """The child is a fresh interpreter: patching the timer, the clock or torch's events here changes nothing."""
    import torch
    monkeypatch.setattr(graders.cuda_engine.timing, "run_until_stable", lambda *a, **k: {"sleep": None})
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda, "Event", object)
    result = run_child(FAKE, {"mode": "time", "sleep_s": 0.02}, timeout_s=60, env=FAKE_ENV)
    assert result.ok, result.message + result.stderr
    assert 0.018 < result.answer["median_s"] < 0.2 and result.answer["samples"] >= 5


def test_handler_exception_is_an_answer_not_a_crash():
    result = run_child(FAKE, {"mode": "raise"}, timeout_s=30, env=FAKE_ENV)
    assert result.ok and "the handler broke" in result.answer["error"]


def test_timing_stops_when_stable_and_reports_the_median():
    from graders.cuda_engine.timing import run_until_stable
    values = iter([1.0, 1.01, 0.99] * 100)
    stats = run_until_stable(lambda _s: next(values), ["k"], budget_s=60, min_samples=9)
    assert stats["k"].converged and stats["k"].samples == 9 and stats["k"].median_s == 1.0


def test_timing_gives_up_on_noise_when_the_budget_is_spent():
    import random

    from graders.cuda_engine.timing import run_until_stable
    noisy = random.Random(0)
    stats = run_until_stable(lambda _s: noisy.choice([1e-3, 1.0]), ["a", "b"], budget_s=0.05, min_samples=5,
                             rse_target=1e-6)
    assert not stats["a"].converged and stats["a"].samples == stats["b"].samples >= 3


def test_guard_regions_and_mismatches_are_described():
    import torch

    from graders.cuda_engine.child import CANARY, GUARD_ELEMENTS, guard_damage, mismatch
    buffer = torch.empty(12 + 2 * GUARD_ELEMENTS, dtype=torch.float32)
    buffer.view(torch.int32).fill_(CANARY)
    assert guard_damage(buffer) == ""
    buffer[GUARD_ELEMENTS + 12 + 7] = 0.0
    buffer[GUARD_ELEMENTS - 2] = 0.0
    damage = guard_damage(buffer)
    assert "after the end of the output (the first at flat index 19 of an output of 12" in damage
    assert "before its start (the nearest at flat index -2)" in damage
    expected = torch.arange(12, dtype=torch.float32).view(3, 4)
    out = expected.clone()
    out[2, 1] = float("nan")
    assert mismatch(expected.clone(), expected, 0.0) == ""
    assert mismatch(out, expected, 0.0) == ("1 of 12 values wrong; first at out[2][1]: expected 9, got nan "
                                            "(NaN: your kernel never wrote it)")
