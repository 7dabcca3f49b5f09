"""The CUDA grader on a machine without a GPU: the parent side (refusal, child limits, the child's own
timer), and the grading child's logic run on CPU tensors with Python "kernels" (`child.check_and_time`, the
phases `child.handle` runs): poisoning, guards, the re-check after timing, and each outcome's status and
message."""
import dataclasses
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import graders.cuda_engine.timing
from graders import gpu, settings, tracks
from graders.cuda_engine import child
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.grade import check_compiles, grade_kernel, report, result_from_child, score
from graders.cuda_engine.problems import InstructionProbe, kinds, problem
from graders.cuda_engine.spec import KernelSpec, load_spec
from graders.gpu import NO_GPU_EXIT, NeedsGPUWorker
from graders.hidden_tests import GRADED_OUTSIDE
from graders.sandbox.run import ChildResult, run_child
from graders.settings import ROOT

FAKE = "fake_perf_child"
NAIVE = (ROOT / "tracks/transpose/solutions/naive.cu").read_text()
SPEC = load_spec("transpose")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    gpu.detect_gpu.cache_clear()
    yield
    gpu.detect_gpu.cache_clear()


@pytest.mark.parametrize("probe, found", [
    (subprocess.CompletedProcess([], 0, '{"name": "NVIDIA H200", "count": 2, "cc": [9, 0]}\n'),
     gpu.GpuInfo("NVIDIA H200", 2, (9, 0))),
    (subprocess.CompletedProcess([], 0, "null\n"), None),                  # the driver found no device
    (subprocess.CompletedProcess([], 1, ""), None),                        # the probe failed
    (subprocess.CompletedProcess([], 0, "a warning, not JSON\n"), None),
], ids=["a-device", "none", "probe-failed", "garbled"])
def test_detect_gpu_reads_its_probe(monkeypatch, probe, found):
    monkeypatch.delenv("WORKSHOP_GPU", raising=False)
    monkeypatch.setattr(gpu.subprocess, "run", lambda *a, **k: probe)
    gpu.detect_gpu.cache_clear()
    try:
        assert gpu.detect_gpu() == found
    finally:
        gpu.detect_gpu.cache_clear()
    assert found is None or found.arch == "sm_90"


def test_workshop_gpu_0_means_no_gpu_without_probing(monkeypatch, no_gpu):
    monkeypatch.setattr(gpu.subprocess, "run", lambda *a, **k: pytest.fail("probed despite WORKSHOP_GPU=0"))
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


def test_hanging_child_is_stopped_within_its_limit(fake_env):
    start = time.monotonic()
    result = run_child(FAKE, {"mode": "hang"}, timeout_s=2, env=fake_env)
    assert result.status == "timeout" and time.monotonic() - start < 10


def test_a_child_that_gives_up_on_its_work_answers_and_exits_without_its_teardown(fake_env):
    """``exit_at_once`` (a hung kernel's answer): the child ends with its answer, not after a teardown (here an
    atexit hook that sleeps) that would hold it to its limit."""
    start = time.monotonic()
    result = run_child(FAKE, {"mode": "abandon"}, timeout_s=60, env=fake_env)
    assert result.status == "ok" and result.answer == {"abandoned": True}, result
    assert time.monotonic() - start < 20


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "ten"])
def test_a_launch_limit_that_is_no_positive_number_of_seconds_is_refused(monkeypatch, value):
    monkeypatch.setenv("WORKSHOP_LAUNCH_TIMEOUT", value)
    with pytest.raises(ValueError, match="WORKSHOP_LAUNCH_TIMEOUT"):
        settings.launch_timeout_s()


def test_crashing_child_is_reported(fake_env):
    result = run_child(FAKE, {"mode": "crash"}, timeout_s=30, env=fake_env)
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
    stats = {"median_s": 1e-3, "mean_s": 1e-3, "rse": 0.001, "samples": 50, "converged": True}
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


def test_parent_side_patches_do_not_reach_the_childs_timer(monkeypatch, fake_env):
    """The child is a fresh interpreter: patching the timer, the clock or torch's events here changes nothing."""
    import torch
    monkeypatch.setattr(graders.cuda_engine.timing, "run_until_stable", lambda *a, **k: {"sleep": None})
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda, "Event", object)
    result = run_child(FAKE, {"mode": "time", "sleep_s": 0.02}, timeout_s=60, env=fake_env)
    assert result.ok, result.message + result.stderr
    assert 0.018 < result.answer["median_s"] < 0.2 and result.answer["samples"] >= 5


def test_handler_exception_is_an_answer_not_a_crash(fake_env):
    result = run_child(FAKE, {"mode": "raise"}, timeout_s=30, env=fake_env)
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


# --- the child's logic on the CPU: a stand-in bench, Python kernels, a stand-in timer -------------------

SAMPLES = 10                                    # timed launches of each subject (`StandInTimer`)
SECONDS = {"baseline": 2e-3, "kernel": 1e-3}    # what the stand-in timer reports: ratio 2
# the timing budget of `check_and_time` here: a backstop (the stand-in timer stops at SAMPLES), long enough
# for all SAMPLES on a machine loaded by the tests running in parallel
BUDGET_S = 60.0
ATTENTION = tracks.get("attention").problem_module()
NVFP4 = tracks.get("nvfp4").problem_module()
SERVING = tracks.get("serving").problem_module()
CORRECT = {                                     # a right Python "kernel" (out, inputs) for every kind
    "copy": lambda out, a: out.copy_(a),
    "transpose": lambda out, a: out.copy_(a.t()),
    "vecadd": lambda out, a, b: torch.add(a, b, out=out),
    "sgemm": lambda out, a, b: torch.matmul(a, b, out=out),
    "bf16gemm": lambda out, a, b: torch.matmul(a.float(), b.float(), out=out),
    "f16gemm": lambda out, a, b: torch.matmul(a.float(), b.float(), out=out),
    "tf32gemm": lambda out, a, b: torch.matmul(a, b, out=out),
    "fp8gemm": lambda out, a, b: torch.matmul(a.float(), b.float(), out=out),
    "bf16gemm_kmajor": lambda out, a, b: torch.matmul(a.float(), b.float(), out=out),
    "f16gemm_kmajor": lambda out, a, b: torch.matmul(a.float(), b.float(), out=out),
    "row_softmax": lambda out, x: out.copy_(torch.softmax(x, dim=-1)),
    "row_sum": lambda out, x: torch.sum(x, dim=1, out=out),
    "copy_rows": lambda out, a: out.copy_(a),
    "attention_forward": lambda out, q, k, v: out.copy_(ATTENTION.attention(q.float(), k.float(), v.float(), False)),
    "attention_forward_causal": lambda out, q, k, v: out.copy_(ATTENTION.attention(q.float(), k.float(), v.float(),
                                                                                   True)),
    "attention_forward_tc": lambda out, q, k, v: out.copy_(ATTENTION.attention(q.float(), k.float(), v.float(),
                                                                               False)),
    "attention_forward_causal_tc": lambda out, q, k, v: out.copy_(ATTENTION.attention(q.float(), k.float(),
                                                                                      v.float(), True)),
    "attention_decode": lambda out, q, k, v: out.copy_(ATTENTION.attention(q.float(), k.float(), v.float(), False)),
    "nvfp4_gemv": lambda out, w, s, ts, x: out.copy_(NVFP4.dequantise(w, s, ts) @ x.double()),
    "rmsnorm_residual": lambda out, x, r, w: SERVING.bf16_view(out, (2, *x.shape)).copy_(
        SERVING.rmsnorm_reference([x, r, w]).exact),
    "swiglu": lambda out, x: SERVING.bf16_view(out, (x.shape[0], x.shape[1] // 2)).copy_(
        SERVING.swiglu_reference([x]).exact),
    "paged_decode": lambda out, *ins: out.copy_(SERVING.paged_reference(list(ins)).o),
    "w4a16_gemv": lambda out, w, s, x: out.copy_(x.double() @ SERVING.dequantise_int4(w, s).T),
    "fp8_scaled_gemm": lambda out, a, b, sa, sb: torch.matmul(a.float(), b.float(), out=out).mul_(sa * sb),
}


class StandInTimer(graders.cuda_engine.timing.Timer):
    """The grader's `Timer` (prepare, launch, verify per sample) with a stand-in clock: exactly ``SAMPLES``
    samples of each subject, reporting ``SECONDS``."""

    def timed(self, name: str, run) -> float:
        run()
        return SECONDS[name]

    def measure(self, budget_s: float):
        return super().measure(budget_s, min_samples=SAMPLES, max_samples=SAMPLES)


class CpuBench(child.Bench):
    """The child's bench on CPU tensors; ``kernel(out, inputs, launch)`` stands in for the compiled kernel
    (``launch`` counts the launches before this one, so a kernel can change once it has been timed)."""

    def __init__(self, kind: str, kernel, definition=None, peaks=None):
        definition = definition or problem(kind)
        super().__init__(definition, small_kernel(kind).geometry, seed=7)
        self.kernel, self.launches, self.device_peaks = kernel, 0, peaks or {}

    def load(self, source: str, function: str) -> dict:
        return {"source": source}

    def launch(self, out, inputs: list, shape) -> None:
        self.kernel(out, inputs, self.launches)
        self.launches += 1

    def timer(self, subjects: dict) -> StandInTimer:
        return StandInTimer(subjects)

    def peaks(self) -> dict[str, float]:
        return self.device_peaks


def small_kernel(kind: str) -> KernelSpec:
    """The first spec kernel of ``kind``, checked at its two smallest check shapes (the larger first) and
    timed at the third: the phases run as for grading, in milliseconds."""
    kernel = next(k for track in tracks.all_tracks() if track.engine == "cuda"
                  for k in load_spec(track.folder).kernels.values() if k.kind == kind)
    shapes = sorted(kernel.check_shapes, key=math.prod)[:3]
    return dataclasses.replace(kernel, check_shapes=(shapes[1], shapes[0]), perf_shape=shapes[2])


def grade_on_cpu(kind: str, kernel, definition=None, peaks=None) -> dict:
    """The child's phases (`child.check_and_time`, as `child.handle` runs them) on a `CpuBench`."""
    return child.check_and_time(CpuBench(kind, kernel, definition, peaks), small_kernel(kind), "src", BUDGET_S)


def correct(kind: str):
    return lambda out, inputs, launch: CORRECT[kind](out, *inputs)


def test_every_kind_has_a_correct_python_kernel():
    assert sorted(CORRECT) == sorted(kinds())


def test_outputs_are_poisoned_with_nan_between_canary_guards():
    buffer, out = CpuBench("transpose", None).output((3, 5))
    assert out.shape == (5, 3) and out.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
    assert out.storage_offset() == child.GUARD_ELEMENTS and buffer.numel() == 15 + 2 * child.GUARD_ELEMENTS
    assert torch.isnan(out).all()
    words = buffer.view(torch.int32)
    assert (words[:child.GUARD_ELEMENTS] == child.CANARY).all()
    assert (words[-child.GUARD_ELEMENTS:] == child.CANARY).all()


def test_an_unwritten_output_fails_even_where_the_answer_is_zero():
    """Only the NaN poison tells "never written" from "written 0"."""
    zeros = dataclasses.replace(problem("copy"), make_inputs=lambda shape, gen: [torch.zeros(shape)])
    assert grade_on_cpu("copy", correct("copy"), zeros)["status"] == "ok"
    result = grade_on_cpu("copy", lambda out, inputs, launch: None, zeros)
    assert result["status"] == "incorrect" and "(NaN: your kernel never wrote it)" in result["message"]


def test_a_problem_that_measures_its_error_gets_it_recorded_with_each_correct_check():
    """`Problem.accuracy` runs on every check that passed, before and after timing, and never on a wrong one;
    `Problem.precision` is in the answer."""
    seen = []

    def accuracy(out, expected):
        seen.append(tuple(out.shape))
        return {"max_abs_error": float((out - expected).abs().max())}

    measured = dataclasses.replace(problem("transpose"), accuracy=accuracy, precision="fp32")
    result = grade_on_cpu("transpose", transpose, measured)
    assert result["status"] == "ok" and len(seen) == len(result["checks"]) >= 4 and result["precision"] == "fp32"
    assert all(c["accuracy"] == {"max_abs_error": 0.0} for c in result["checks"])
    seen.clear()
    result = grade_on_cpu("transpose", one_ulp_off, measured)
    assert result["status"] == "incorrect" and seen == [] and "accuracy" not in result["checks"][0]
    plain = grade_on_cpu("transpose", transpose)
    assert "precision" not in plain and all("accuracy" not in c for c in plain["checks"])


def test_an_instruction_probe_is_measured_with_the_timing_and_does_not_change_the_ratio():
    """`Problem.instruction_probe`: the bench's measurement of it lands in the timing beside the ratio ({} on a
    bench that cannot run it); a kind without one has none."""
    probe = InstructionProbe("mma.sync stand-in", "extern \"C\" __global__ void probe(float*, int) {}", 4096)
    probed = dataclasses.replace(problem("transpose"), instruction_probe=probe)

    class Probing(CpuBench):
        def instruction_ceiling(self, p):
            return {"name": p.name, "throughput": 1e12}

    result = child.check_and_time(Probing("transpose", transpose, probed), small_kernel("transpose"), "src", BUDGET_S)
    assert result["status"] == "ok" and result["timing"]["ratio"] == 2.0
    assert result["timing"]["instruction_ceiling"] == {"name": "mma.sync stand-in", "throughput": 1e12}
    assert grade_on_cpu("transpose", transpose, probed)["timing"]["instruction_ceiling"] == {}
    assert "instruction_ceiling" not in grade_on_cpu("transpose", transpose)["timing"]


@pytest.mark.parametrize("kind", sorted(CORRECT))
def test_a_correct_kernel_is_checked_timed_and_checked_again(kind):
    kernel = small_kernel(kind)
    result = grade_on_cpu(kind, correct(kind))
    assert (result["status"], result["message"]) == ("ok", "")
    assert result["compile"] == {"source": "src"}
    after = [kernel.perf_shape, *kernel.check_shapes]
    assert [(tuple(c["shape"]), c.get("after_timing", False)) for c in result["checks"]] == \
        [(s, False) for s in kernel.check_shapes] + [(s, True) for s in after]
    timing = result["timing"]
    assert timing["shape"] == list(kernel.perf_shape) and timing["verified_launches"] == SAMPLES
    assert timing["ratio"] == 2.0 and timing["kernel"]["samples"] == SAMPLES and timing["ceiling"] == {}
    sass = ["sass"] if problem(kind).sass_requirements else []
    assert list(result["phases"]) == ["compile", *sass, "correctness", "timing", "recheck"]
    assert all(seconds >= 0 for seconds in result["phases"].values())


@pytest.mark.parametrize("kind", sorted(CORRECT))
def test_a_kernel_one_element_short_fails_on_the_nan_it_left(kind):
    def one_short(out, inputs, launch):
        full = torch.empty_like(out)
        CORRECT[kind](full, *inputs)
        out.view(-1)[:-1] = full.view(-1)[:-1]
    result = grade_on_cpu(kind, one_short)
    assert result["status"] == "incorrect" and len(result["checks"]) == 1
    shape = small_kernel(kind).check_shapes[0]
    assert result["message"].startswith(f"at shape {'x'.join(map(str, shape))} "
                                        f"({', '.join(problem(kind).shape_names)}): 1 of ")
    # a kind with its own checker words it its own way
    assert "never written" in result["message"] if problem(kind).compare else "never wrote it" in result["message"]


def touch(out, offset: int) -> None:
    """Write 0 at ``offset`` elements from the start of ``out`` in its buffer (outside ``out``: a guard)."""
    torch.as_strided(out, (1,), (1,), out.storage_offset() + offset).fill_(0.0)


def transpose(out, inputs, launch) -> None:
    out.copy_(inputs[0].t())


def one_ulp_off(out, inputs, launch):
    transpose(out, inputs, launch)
    out[0, 0] = torch.nextafter(out[0, 0], torch.tensor(math.inf))


def past_the_end(out, inputs, launch):
    transpose(out, inputs, launch)
    touch(out, out.numel())


def before_the_start(out, inputs, launch):
    transpose(out, inputs, launch)
    touch(out, -1)


def past_the_end_once_timed(out, inputs, launch):
    transpose(out, inputs, launch)
    if launch >= CHECKS_BEFORE:
        touch(out, out.numel())


def lazy_after(launches: int, kernel):
    """``kernel`` for its first ``launches`` launches, then a kernel that does no work."""
    return lambda out, inputs, launch: kernel(out, inputs, launch) if launch < launches else None


REMEMBERED: dict = {}   # what the memoizing kernels below remember, per grading


def memoizing(key):
    """Computes once per ``key(out, inputs)``, then writes the remembered answer."""
    def kernel(out, inputs, launch):
        if launch == 0:
            REMEMBERED.clear()
        k = key(out, inputs)
        if k not in REMEMBERED:
            transpose(out, inputs, launch)
            REMEMBERED[k] = out.clone()
        out.copy_(REMEMBERED[k])
    return kernel


by_shape = memoizing(lambda out, inputs: out.shape)
by_pointer = memoizing(lambda out, inputs: (out.data_ptr(), out.shape))
by_pointer_and_samples = memoizing(lambda out, inputs: (out.data_ptr(), float(inputs[0].view(-1)[0]),
                                                        float(inputs[0].view(-1)[-1])))


def every_other_launch_once_timed(out, inputs, launch):
    """Honest for the checks, then lazy on every second launch (a window no check alone sees)."""
    if launch < CHECKS_BEFORE or launch % 2:
        transpose(out, inputs, launch)


def leaves_the_timed_shape_to_the_baseline(out, inputs, launch):
    """Works at every check shape, never at the timed one (the baseline writes the same output buffer)."""
    if out.shape != (small_kernel("transpose").perf_shape[1], small_kernel("transpose").perf_shape[0]):
        transpose(out, inputs, launch)


def crash(when: int):
    """Correct until launch ``when``, then a CUDA error (as cuda.core raises it)."""
    def kernel(out, inputs, launch):
        if launch >= when:
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
        transpose(out, inputs, launch)
    return kernel


CHECKS_BEFORE = 2                    # small_kernel's check shapes
TIMED = CHECKS_BEFORE + SAMPLES      # launches before the re-check
TIMED_WRONG = ("timed launch {} (fresh inputs at shape 4097x31) gave wrong results: every launch must do all its "
               "work on the inputs it is given, none may reuse an earlier result or skip work. ")
# transpose at small_kernel's shapes: checked at 33x65 and 1x1, timed at 4097x31 (127007 elements)
OUTCOMES = {   # name: (kernel, status, the message's start, words further on)
    "does no work": (lambda out, inputs, launch: None, "incorrect",
                     "at shape 33x65 (rows, cols): 2145 of 2145 values wrong; first at out[0][0]: expected ",
                     "(NaN: your kernel never wrote it)"),
    "one ulp off": (one_ulp_off, "incorrect",
                    "at shape 33x65 (rows, cols): 1 of 2145 values wrong; first at out[0][0]: expected ", ""),
    "writes past the end": (past_the_end, "oob_write", "at shape 33x65 your kernel wrote outside its output: "
                            "1 value(s) after the end of the output (the first at flat index 2145 of an output "
                            "of 2145 elements)", ""),
    "writes before the start": (before_the_start, "oob_write", "at shape 33x65 your kernel wrote outside its "
                                "output: 1 value(s) before its start (the nearest at flat index -1)", ""),
    "writes past the end once timed": (past_the_end_once_timed, "oob_write", "while timed, your kernel wrote "
                                       "outside its output: 1 value(s) after the end of the output (the first "
                                       "at flat index 127007 of an output of 127007 elements)", ""),
    "stops working once timed": (lazy_after(CHECKS_BEFORE + 2, transpose), "incorrect", TIMED_WRONG.format(3) +
                                 "127007 of 127007 values wrong", "never wrote it"),
    "reuses its result for the shape": (by_shape, "incorrect", TIMED_WRONG.format(2) + "127007 of 127007 ", ""),
    "reuses its result for the pointer": (by_pointer, "incorrect", TIMED_WRONG.format(2), ""),
    "skips every other launch once timed": (every_other_launch_once_timed, "incorrect", TIMED_WRONG.format(1),
                                            "never wrote it"),
    "leaves the timed shape to the baseline": (leaves_the_timed_shape_to_the_baseline, "incorrect",
                                               TIMED_WRONG.format(1), "never wrote it"),
    "CUDA error while checked": (crash(0), "crashed", "CUDA error while checking correctness: "
                                 "CUDA_ERROR_ILLEGAL_ADDRESS", ""),
    "CUDA error while timed": (crash(CHECKS_BEFORE), "crashed", "CUDA error while timing: ", ""),
    "CUDA error after timing": (crash(TIMED), "crashed", "CUDA error while re-checking correctness after "
                                "timing: ", ""),
}


@pytest.mark.parametrize("name", list(OUTCOMES))
def test_each_outcome_has_its_status_and_message(name):
    kernel, status, start, words = OUTCOMES[name]
    result = grade_on_cpu("transpose", kernel)
    assert result["status"] == status and result["message"].startswith(start), result["message"]
    assert words in result["message"]


def test_a_launch_still_running_at_its_limit_is_a_timeout_and_the_child_leaves_with_its_answer():
    class Hung(CpuBench):
        def finish_launch(self, shape: str) -> None:
            if self.launches == 2:   # the second check shape's launch never ends
                raise child.LaunchHung(10, shape)

    kernel = small_kernel("transpose")
    found = child.check_and_time(Hung("transpose", correct("transpose")), kernel, "src", BUDGET_S)
    label = "x".join(map(str, kernel.check_shapes[1]))
    assert found["status"] == "timeout" and found["exit_at_once"] is True
    assert found["message"] == (f"your kernel did not finish within 10 s of its launch at shape {label} (an endless "
                                "loop? a __syncthreads() or a barrier wait that not every thread reaches?)")
    assert [c["ok"] for c in found["checks"]] == [True] and "correctness" in found["phases"]
    assert not child.reusable(found)


def test_waiting_for_a_launch_polls_until_it_is_done_or_the_limit_has_passed():
    answers = iter([False, False, True])
    assert child.wait_until(lambda: next(answers), 5.0)
    start = time.monotonic()
    assert not child.wait_until(lambda: False, 0.2)
    assert 0.2 <= time.monotonic() - start < 1.0


def test_a_kernel_that_stops_working_after_timing_is_caught_by_the_re_check():
    result = grade_on_cpu("transpose", lazy_after(TIMED, transpose))
    assert result["status"] == "incorrect" and result["timing"]["verified_launches"] == SAMPLES
    assert result["message"].startswith("after being timed, the kernel's results were wrong (does it skip work "
                                        "or reuse old results?) at shape 4097x31 (rows, cols): 127007 of ")


def test_a_memo_keyed_on_input_values_never_hits_while_timed():
    """Timed launches get fresh inputs: a kernel remembering results by pointer and sampled values must compute."""
    result = grade_on_cpu("transpose", by_pointer_and_samples)
    assert result["status"] == "ok"
    assert len(REMEMBERED) == len(result["checks"]) + SAMPLES   # one entry per launch: nothing was reused


def test_a_wrong_timed_launch_scores_nothing_however_fast():
    answer = grade_on_cpu("transpose", every_other_launch_once_timed)
    kernel = SPEC.kernel("padded")
    result = result_from_child(ChildResult("ok", answer=answer), SPEC, kernel, 10, seed=7)
    assert result.status == "incorrect" and result.points == 0 and "timed launch 1" in result.message


# transpose timed at 4097x31: 2 * 4 * 4097 * 31 bytes per launch, in the stand-in's 1 ms
TIMED_THROUGHPUT = 2 * 4 * 4097 * 31 / SECONDS["kernel"]


@pytest.mark.parametrize("peak, status", [
    (TIMED_THROUGHPUT, "ok"),                    # exactly at the memory's peak: possible
    (TIMED_THROUGHPUT * 1.001, "ok"),
    (TIMED_THROUGHPUT * 0.999, "implausible"),  # faster than the memory can move the bytes
])
def test_a_time_faster_than_the_hardware_allows_is_not_credited(peak, status):
    result = grade_on_cpu("transpose", correct("transpose"), peaks={"dram": peak, "fp32": 1.0})
    assert result["status"] == status and result["timing"]["ceiling"] == {"roof": "dram", "throughput": peak}
    if status == "implausible":
        assert result["message"] == (
            f"your kernel's median time, 1 ms, means {TIMED_THROUGHPUT / 1e9:.0f} GB/s, above the memory's peak "
            f"bandwidth on this GPU ({peak / 1e9:.0f} GB/s): no kernel that does the work is that fast, so its "
            "speed is not credited (tensor cores in an FP32 step, or work done outside the timed launch?)")


def test_sgemm_is_held_to_the_fp32_peak():
    shape = small_kernel("sgemm").perf_shape
    flops = 2 * math.prod(shape) / SECONDS["kernel"]
    assert grade_on_cpu("sgemm", correct("sgemm"), peaks={"dram": 1.0, "fp32": flops})["status"] == "ok"
    result = grade_on_cpu("sgemm", correct("sgemm"), peaks={"dram": 1e30, "fp32": flops / 2})
    assert result["status"] == "implausible" and "the FP32 pipes' peak rate" in result["message"]


def test_an_implausible_time_keeps_the_correctness_points_only():
    padded = SPEC.kernel("padded")
    answer = fake_ok_answer(padded.target * 10) | {"status": "implausible", "message": "above the peak"}
    result = result_from_child(ChildResult("ok", answer=answer), SPEC, padded, 10, seed=7)
    assert result.status == "implausible" and result.points == padded.points_correct == 1
    assert result.details["score"] == {"correctness": 1, "performance": 0.0, "max": 3, "total": 1}
    assert "implausible (hidden, seed 7): above the peak" in report(result)


def test_a_compile_error_is_reported_before_anything_runs():
    class NoCompiler(CpuBench):
        def load(self, source, function):
            raise CompileError("Your CUDA code did not compile: line 3: error")
    result = child.check_and_time(NoCompiler("transpose", transpose), small_kernel("transpose"), "src", BUDGET_S)
    assert result.pop("phases").keys() == {"compile"}
    assert result == {"status": "compile_error", "message": "Your CUDA code did not compile: line 3: error"}


def test_the_graders_own_errors_are_not_blamed_on_the_kernel():
    def broken(out, inputs, launch):
        raise ValueError("a bug in the grader")
    with pytest.raises(ValueError, match="a bug in the grader"):
        grade_on_cpu("transpose", broken)


def test_a_kernel_cannot_launch_work_the_timer_would_not_see():
    """Work on another stream is out of reach: the grader compiles without relocatable device code, so a
    device-side launch (dynamic parallelism) is a compile error, and host stream APIs do not exist."""
    from graders.cuda_engine.compile import compile_cuda
    launches = 'extern "C" __global__ void later(float* out) { out[0] = 1.0f; }\n' \
        'extern "C" __global__ void copy_kernel(float* out, const float* in, int rows, int cols) {\n' \
        '  later<<<1, 1>>>(out);\n}\n'
    with pytest.raises(CompileError, match="device-side kernel launch could not be processed"):
        compile_cuda(launches, kernels=("copy_kernel",), defines={}, arch="sm_90")
    streams = launches.replace("later<<<1, 1>>>(out);", "cudaStream_t s; cudaStreamCreate(&s);")
    with pytest.raises(CompileError, match='identifier "cudaStreamCreate" is undefined'):
        compile_cuda(streams, kernels=("copy_kernel",), defines={}, arch="sm_90")


TF32_MMA = r'''
extern "C" __global__ void sgemm_naive(float* C, const float* A, const float* B, int M, int N, int K)
{
    const unsigned a0 = __float_as_uint(A[threadIdx.x]), a1 = __float_as_uint(A[threadIdx.x + 32]),
                   a2 = __float_as_uint(A[threadIdx.x + 64]), a3 = __float_as_uint(A[threadIdx.x + 96]);
    const unsigned b0 = __float_as_uint(B[threadIdx.x]), b1 = __float_as_uint(B[threadIdx.x + 32]);
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    C[threadIdx.x] = d0 + d1 + d2 + d3;
}
'''


def test_an_fp32_gemm_on_tensor_cores_is_unmet_and_the_ffma_reference_is_not():
    """sgemm's SASS requirement: the FP32 pipes only. A TF32 mma.sync shows up as HMMA in the SASS."""
    from graders.cuda_engine import sass
    from graders.cuda_engine.compile import compile_cuda
    assert problem("sgemm").sass_requirements == ("no_tensor_cores",)
    defines = {"TILE_X": 32, "TILE_Y": 32}
    mma = compile_cuda(TF32_MMA, kernels=("sgemm_naive",), defines=defines, arch="sm_90")
    failures, _ = sass.check(mma.cubin, "sgemm_naive", ["no_tensor_cores"], disassemble_always=False)
    assert len(failures) == 1 and failures[0].startswith("it uses tensor cores (") and "x HMMA" in failures[0]
    honest = compile_cuda((ROOT / "tracks/gemm/solutions/naive.cu").read_text(), kernels=("sgemm_naive",),
                          defines=defines, arch="sm_90")
    assert sass.check(honest.cubin, "sgemm_naive", ["no_tensor_cores"], disassemble_always=False)[0] == []


def test_a_correct_kernel_missing_a_sass_requirement_is_timed_but_gets_correctness_points_only():
    failure = "it uses tensor cores (4 x HMMA in its SASS)"

    class TensorCoreBench(CpuBench):
        def sass_failures(self, function):
            return [failure]
    bench = TensorCoreBench("sgemm", correct("sgemm"))
    answer = child.check_and_time(bench, small_kernel("sgemm"), "src", BUDGET_S)
    assert answer["status"] == "unmet" and answer["timing"]["ratio"] == 2.0
    assert answer["message"] == f"correct, but {failure}. Its speed is not credited"
    assert answer["sass"] == {"requirements": ["no_tensor_cores"], "unmet": [failure]}
    gemm = load_spec("gemm")
    warptiling = gemm.kernel("warptiling")
    result = result_from_child(ChildResult("ok", answer=answer), gemm, warptiling, 10, seed=7)
    assert result.points == warptiling.points_correct and result.details["score"]["performance"] == 0
