"""The model engine (W6, KernelBench-style) without a GPU: a ModelNew's cell held to its allowlist
(graders/model_engine/source.py), the judge's defences driven in this process on CPU tensors, and each reference
of tracks/kernelbench graded in a sandboxed child on the CPU (the pure-PyTorch path of each reference: its Triton
kernel needs the GPU; tests/gpu/test_kernelbench_gpu.py runs that one). Each known-wrong solution is graded through
nbgrader: tests/e2e/test_kernelbench_nbgrader.py."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from graders import targets_gpu
from graders.model_engine import child
from graders.model_engine.grade import (check, checked, fast_flags, fast_p, grade_model, report,
                                         result_from_child)
from graders.model_engine.source import ModelSource, ModelSourceError, model_from_cell, source_problems
from graders.model_engine.spec import load_model_spec
from graders.result import GradeResult, Status
from graders.sandbox.run import ChildResult
from model_sources import CUDA_RELU

SPEC = load_model_spec("kernelbench")
QUICK = {"device": "cpu", "trials": 3, "timed_runs": 3}   # the CPU path: tests only, its times mean nothing

HEAD = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"


def _cell(forward: str, *, before: str = "", init: str = "") -> str:
    """A ModelNew cell whose forward's body is ``forward`` (one line), with module-level ``before`` lines and
    ``__init__`` lines ``init``."""
    return (before + HEAD + "    def __init__(self):\n        super().__init__()\n" + init
            + f"\n    def forward(self, x):\n        {forward}\n")


@pytest.mark.parametrize("cell, why", [
    (_cell("return x", before="import os\n"), "os is not importable"),
    (_cell("return x", before="from torch.utils.cpp_extension import load_inline\n"), "import only"),
    (_cell("return torch.utils.cpp_extension.load_inline('m', '')"), "attribute utils"),
    (_cell("return eval('x')"), "eval is not defined"),
    (_cell("return getattr(x, 'relu')()"), "getattr is not defined"),
    (_cell("return x.__class__"), "attribute __class__"),
    (_cell("return torch._C"), "attribute _C"),
    (_cell("return torch.library.Library('aten', 'IMPL')"), "attribute library"),
    (_cell("return x", init="        nn.modules.module.register_module_forward_hook(print)\n"), "not allowed"),
    (_cell("return x", init="        torch.Tensor.relu = torch.zeros_like\n"), "only attributes of self"),
    (_cell("return x", init="        torch.set_float32_matmul_precision('medium')\n"), "set_float32"),
    (_cell("return x", init="        torch.manual_seed(0)\n"), "manual_seed"),
    (_cell("global y\n        return x"), "Global"),
    (_cell("return get_inputs()[0]"), "get_inputs is not defined"),
])
def test_the_allowlist_refuses_what_could_reach_the_grader(cell, why):
    problems = source_problems(cell)
    assert problems and why in " ".join(problems), problems
    with pytest.raises(ModelSourceError, match="does not run"):
        model_from_cell(cell)


def test_every_reference_passes_the_allowlist_and_a_stub_is_a_stub():
    for problem in SPEC.problems.values():
        assert source_problems(problem.reference.read_text()) == [], problem.id
    stub = ModelSource(_cell("raise NotImplementedError()"))
    assert stub.is_stub and not ModelSource(_cell("return x")).is_stub


def test_the_submission_runs_without_the_problems_names_or_dangerous_builtins():
    source = _cell("return x") + "\nSEEN = 1\n"
    made = child.load_submission(source)
    namespace = made.forward.__globals__
    assert "Model" not in namespace and "get_inputs" not in namespace
    assert {"eval", "exec", "open", "getattr", "type", "compile"}.isdisjoint(namespace["__builtins__"])
    with pytest.raises(ImportError, match="not importable"):
        namespace["__builtins__"]["__import__"]("os")


def _judge(problem_id: str = "relu", seed: int = 7) -> child.Judge:
    problem = SPEC.problem(problem_id)
    namespace = child.problem_namespace(child.problem_text(SPEC.path.parent / "problem.py", problem_id),
                                        problem.cpu_sizes)
    return child.Judge(torch, problem, namespace, "cpu", seed)


def test_inputs_are_drawn_on_the_judges_device_not_copied_there():
    """``get_inputs`` runs with the judge's device as torch's default (on a GPU: no host draw and copy a call),
    and the same seed draws the same inputs."""
    judge = _judge()
    drawn_on = []
    made = judge.get_inputs
    judge.get_inputs = lambda: drawn_on.append(torch.get_default_device()) or made()
    first, again = judge.inputs(4), judge.inputs(4)
    assert drawn_on == [torch.device("cpu")] * 2 and torch.equal(first[0], again[0])
    meta = child.Judge(torch, judge.problem, {"get_inputs": lambda: drawn_on.append(torch.get_default_device())
                                              or [torch.ones(2)], "get_init_inputs": lambda: [],
                                              "Model": torch.nn.Identity}, "meta", 7)
    (x,) = meta.inputs(0)
    assert drawn_on[-1] == torch.device("meta") and x.device.type == "meta"


def _numpys_verdict(got, want, problem) -> np.ndarray:
    """What the comparison was before `child.Judge.far`: numpy.isclose on float64 copies of the whole outputs."""
    return ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=problem.rtol, atol=problem.atol,
                       equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32])
def test_the_comparison_a_chunk_at_a_time_is_numpys_isclose_value_by_value(dtype):
    """Over chunk boundaries, at the tolerance's edge (in float64, the comparison's own precision), with NaN,
    infinities and values far apart; and the first value that differs is named as before."""
    judge = _judge()
    rng = np.random.default_rng(3)
    want = (rng.standard_normal((3, child.COMPARED_AT_ONCE + 5)) * 4).astype(dtype)
    tolerance = judge.problem.atol + judge.problem.rtol * np.abs(want.astype(np.float64))
    step = rng.choice([0.0, 0.5, 0.999999, 1.0, 1.000001, 2.0], size=want.shape) * rng.choice([-1, 1], want.shape)
    got = (want.astype(np.float64) + step * tolerance).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        for where, (g, w) in {(0, 1): (np.nan, np.nan), (0, 2): (np.nan, 1), (1, 3): (np.inf, np.inf),
                              (1, 4): (-np.inf, np.inf), (2, 5): (1, np.inf), (2, 6): (np.inf, 1)}.items():
            got[where], want[where] = g, w
    verdict = _numpys_verdict(got, want, judge.problem)
    assert 0 < verdict.sum() < verdict.size
    assert np.array_equal(judge.far(got, want), verdict.reshape(-1))
    assert np.array_equal(judge.far(got.T, want.T), verdict.T.reshape(-1))   # not contiguous
    first = tuple(int(i) for i in np.argwhere(verdict)[0])
    message = (f"trial 1: out{list(first)} = {got.astype(np.float64)[first]:.6g}, expected "
               f"{want.astype(np.float64)[first]:.6g} (atol {judge.problem.atol:g}, rtol {judge.problem.rtol:g}; "
               f"{int(verdict.sum())} of {verdict.size} values differ)")
    with pytest.raises(child.Failed) as failed:
        judge.compare(got, want, "trial 1")
    assert str(failed.value) == message


def test_a_single_value_is_compared_too():
    judge = _judge()
    judge.compare(np.array(1.0, dtype=np.float32), np.array(1.0, dtype=np.float32), "trial 1")
    with pytest.raises(child.Failed, match=r"trial 1: out\[\] = 2, expected 1 .*1 of 1 values differ"):
        judge.compare(np.array(2.0, dtype=np.float32), np.array(1.0, dtype=np.float32), "trial 1")


class CountingRelu(torch.nn.Module):
    """Right for its first ``honest`` calls, then zeros: fast only where it is no longer checked."""

    def __init__(self, honest: int):
        super().__init__()
        self.honest, self.calls = honest, 0

    def forward(self, x):
        self.calls += 1
        return torch.relu(x) if self.calls <= self.honest else torch.zeros_like(x)


def test_every_timed_call_is_checked_after_its_timer_stopped():
    judge = _judge()
    model = CountingRelu(honest=3 + child.WARMUP_CALLS)
    for n in range(3):
        judge.trial(model, n)   # right in every correctness trial
    with pytest.raises(child.Failed, match="timed call 1"):
        judge.time(model, 3, runs=3, check=True)


class FixesUpLater(torch.nn.Module):
    """Returns an unwritten output and writes the previous call's output on the next call."""

    def __init__(self):
        super().__init__()
        self.pending = None

    def forward(self, x):
        if self.pending is not None:
            out, given = self.pending
            out.copy_(torch.relu(given))
        out = torch.empty_like(x)
        self.pending = (out, x)
        return out


def test_an_output_is_copied_out_as_the_call_returns():
    judge = _judge()
    with pytest.raises(child.Failed) as failed:
        judge.trial(FixesUpLater(), 0)
    assert failed.value.status == Status.INCORRECT


def test_inputs_are_fresh_for_every_call_and_seeded():
    judge, again = _judge(seed=7), _judge(seed=7)
    first, second = judge.inputs(0)[0], judge.inputs(1)[0]
    assert not torch.equal(first, second)
    assert torch.equal(first, again.inputs(0)[0]) and not torch.equal(first, _judge(seed=8).inputs(0)[0])


class Subclass(torch.Tensor):
    pass


@pytest.mark.parametrize("forward, message", [
    (lambda x: torch.relu(x).as_subclass(Subclass), "not a subclass"),
    (lambda x: (torch.relu(x),), "tuple"),
    (lambda x: torch.relu(x).to_sparse(), "dense"),
    (lambda x: x.relu_(), "shares memory"),
])
def test_an_output_that_is_not_a_dense_new_tensor_is_refused(forward, message):
    judge = _judge()
    model = type("Hostile", (torch.nn.Module,), {"forward": lambda self, x: forward(x)})()
    with pytest.raises(child.Failed, match=message):
        judge.trial(model, 0)


@pytest.mark.parametrize("problem_id", sorted(SPEC.problems))
def test_each_reference_is_right_and_timed_on_the_cpu(problem_id):
    result = grade_model("kernelbench", problem_id, ModelSource(SPEC.problem(problem_id).reference.read_text()),
                         **QUICK)
    assert result.status == Status.OK, result.failure_line()
    assert result.cases == QUICK["trials"] and result.points >= SPEC.points_correct
    timing = result.details["timing"]
    assert timing["submission"]["runs"] == QUICK["timed_runs"] and set(timing["speedup"]) == {"eager"}
    assert set(result.details["fast_p"]["eager"]) == {"1.0", "1.5"}
    phases = result.details["phases"]   # each phase that ran, in order, the child's start around them, and the
    measured = result.details["baseline"]["measured_here"]   # baseline's child where this grading measured it
    assert list(phases) == ["setup", "load", "trials", "timing", "child_start"] + ["baseline"] * measured, phases
    assert all(s >= 0 for s in phases.values())
    assert sum(phases.values()) - phases.get("baseline", 0) <= result.details["seconds"] + 0.01


def test_the_baseline_child_times_the_reference_alone_with_no_submission():
    """`child.handle` in ``"baseline"`` mode, in this process on the CPU: no source in the request, the eager
    reference timed (torch.compile only where asked), the submission's phases absent."""
    answer = child.handle({"spec_path": str(SPEC.path), "problem_id": "relu", "seed": 0, "device": "cpu",
                           "mode": "baseline", "sizes": SPEC.problem("relu").cpu_sizes, "timed_runs": 3})
    assert answer["status"] == Status.OK and set(answer["timing"]) == {"eager"}
    assert answer["timing"]["eager"]["runs"] == 3 and answer["timing"]["eager"]["median_s"] > 0
    assert list(answer["phases"]) == ["setup", "eager"]


def test_the_baselines_are_timed_as_a_submission_is_each_output_checked(monkeypatch):
    """Eager and torch.compile are timed with every timed output checked before the next call, as a submission's
    are (`Judge.time`'s ``check``): the check's host work slows the call after it, so both sides of a speed-up are
    measured under it."""
    timed = []
    monkeypatch.setattr(child.Judge, "time", lambda self, model, first, runs, check: timed.append(check) or
                        {"median_s": 1.0, "min_s": 1.0, "runs": runs})
    monkeypatch.setattr(torch, "compile", lambda model: model)
    judge = _judge()
    timing = child.baseline(judge, child.Clock({}, "setup"), 3, compiled=True)
    assert set(timing) == {"eager", "compile"} and timed == [True, True]


def test_the_baseline_is_measured_once_per_process_and_never_beside_a_submission(monkeypatch):
    """`grade.grade_model` with the children's answers handed in: a correct submission's child times only it; the
    reference's times come from a child of their own (no source, the fixed `BASELINE_SEED`), measured for the
    first correct grading only and reused for the next; a wrong submission starts no baseline; a failed baseline
    is the grader's error and is not kept."""
    from graders.model_engine import grade
    from graders.sandbox.run import ChildResult
    submission = {"status": "ok", "message": "", "device": "cpu", "trials": 3, "phases": {"timing": 0.1},
                  "timing": {"submission": {"median_s": 2e-3, "min_s": 2e-3, "runs": 3}}}
    wrong = {"status": "incorrect", "message": "trial 1: out[0] = 1, expected 0", "device": "cpu", "phases": {}}
    reference = {"status": "ok", "message": "", "phases": {"eager": 0.2},
                 "timing": {"eager": {"median_s": 6e-3, "min_s": 6e-3, "runs": 3}}}
    answers = iter([ChildResult("ok", answer=submission, seconds=1.0),
                    ChildResult("ok", answer={"error": "RuntimeError: CUDA error: out of memory"}, seconds=1.0),
                    ChildResult("ok", answer=wrong, seconds=1.0),
                    ChildResult("ok", answer=submission, seconds=1.0),
                    ChildResult("ok", answer=reference, seconds=2.5),
                    ChildResult("ok", answer=submission, seconds=1.0)])
    requests = []
    monkeypatch.setattr(grade, "run_child", lambda handler, request, **kw: requests.append(request)
                        or next(answers))
    monkeypatch.setattr(grade, "_baselines", {})
    honest = ModelSource(SPEC.problem("relu").reference.read_text())
    failed = grade_model("kernelbench", "relu", honest, **QUICK)
    assert failed.status == Status.GRADER_ERROR and failed.points == 0
    assert failed.message.startswith("the grader failed: timing the reference of relu")
    assert grade_model("kernelbench", "relu", honest, **QUICK).status == Status.INCORRECT
    first = grade_model("kernelbench", "relu", honest, **QUICK)
    again = grade_model("kernelbench", "relu", honest, **QUICK)
    modes = [r["mode"] for r in requests]
    assert modes == ["grade", "baseline", "grade", "grade", "baseline", "grade"]
    for r in requests:
        assert ("source" in r) == (r["mode"] == "grade")
        assert r["seed"] == grade.BASELINE_SEED or r["mode"] == "grade"
    for result in (first, again):
        assert result.status == Status.OK and result.details["timing"]["speedup"] == {"eager": pytest.approx(3.0)}
        assert result.details["timing"]["eager"]["median_s"] == 6e-3
        assert result.details["fast_p"]["eager"] == {"1.0": True, "1.5": True}
    assert first.details["baseline"]["measured_here"] and first.details["phases"]["baseline"] == 2.5
    assert first.details["baseline"]["phases"] == {"eager": 0.2}   # the baseline child's own split
    assert not again.details["baseline"]["measured_here"] and "baseline" not in again.details["phases"]
    assert again.details["baseline"]["phases"] is None


def test_fast_p_is_the_share_of_results_correct_and_at_least_p_times_as_fast():
    def result(correct: bool, speedup: float) -> GradeResult:
        return GradeResult("relu", Status.OK if correct else Status.INCORRECT, "",
                           details={"fast_p": fast_flags(correct, {"compile": speedup})})
    results = [result(True, 1.6), result(True, 1.2), result(True, 0.9), result(False, 3.0)]
    assert fast_p(results, 1.0) == 0.5 and fast_p(results, 1.5) == 0.25 and fast_p([], 1.0) == 0.0
    assert fast_p(results, 1.0, "eager") == 0.0   # no eager time in these: not fast


def test_the_curve_names_the_gpus_of_the_targets_records_and_a_grading_on_another_one_says_so(tmp_path):
    """``curve`` says where the targets were measured and where the grading ran (the worker's GPU); on another
    model the student's report and the TA's log say so, and the points are the same."""
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"track": "kernelbench", "gpu": "NVIDIA H100 80GB HBM3"}))
    measured = dataclasses.replace(SPEC, targets="measured", measured_in=(str(record), str(tmp_path / "gone.json")))
    answer = {"status": "ok", "device": "cuda", "trials": 1,
              "timing": {"speedup": {"compile": 1.2}, "submission": {"median_s": 1e-3, "runs": 3},
                         "compile": {"median_s": 1.2e-3, "runs": 3}}}
    results = {gpu: result_from_child(ChildResult("ok", answer=dict(answer)), measured, SPEC.problem("relu"), 10,
                                      seed=1, graded_on=gpu)
               for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")}
    same, other = results["NVIDIA H100 80GB HBM3"], results["NVIDIA H200"]
    assert other.details["curve"] == {"floor": SPEC.problem("relu").floor, "target": SPEC.problem("relu").target,
                                      "targets": "measured", "measured_on": ["NVIDIA H100 80GB HBM3"],
                                      "track": SPEC.name, "graded_on": "NVIDIA H200"}
    assert same.points == other.points
    assert "note: the speed targets were measured on NVIDIA H100 80GB HBM3" not in report(same)
    assert "this grading ran on NVIDIA H200" in report(other)
    assert targets_gpu.ta_lines([same.as_dict()]) == []
    assert len(targets_gpu.ta_lines([other.as_dict(), other.as_dict()])) == 1


def test_a_refused_cell_starts_no_child_and_says_why():
    result = grade_model("kernelbench", "relu", ModelSource(_cell("return x", before="import os\n")), **QUICK)
    assert result.status == Status.REFUSED and "os is not importable" in result.message and result.points == 0


TRITON_ONLY_RELU = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(out_ptr, x_ptr, n, BLOCK_SIZE: tl.constexpr):
    for start in range(0, n, BLOCK_SIZE):   # one program, a loop bounded by an argument
        offsets = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + offsets, mask=offsets < n)
        tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=offsets < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(1,)](out, x, x.numel(), BLOCK_SIZE=256)
        return out
'''


def test_the_check_cell_runs_a_triton_kernel_in_the_interpreter_without_a_gpu(capsys):
    """No GPU here: the check runs the model on the CPU, its Triton kernel in Triton's interpreter (this ModelNew
    has no PyTorch path; its loop's bound is an argument, which the interpreter fails on under numpy 2.4), and says
    ✓; a wrong one ✗ with the first wrong value; the release's stub ✗."""
    assert checked("kernelbench", "relu", ModelSource(TRITON_ONLY_RELU))[0] == "✓"
    wrong = TRITON_ONLY_RELU.replace("tl.maximum(x, 0.0)", "x")
    mark, line = checked("kernelbench", "relu", ModelSource(wrong))
    assert mark == "✗" and "trial 1: out[" in line and "Triton's interpreter" in line
    stub = ModelSource(_cell("# YOUR CODE HERE\n        ..."))
    check("kernelbench", "relu", stub)
    assert capsys.readouterr().out == "✗ relu: not written yet (forward is still the stub)\n"




@pytest.mark.parametrize("line, allowed", [
    ("from graders.model_engine.cuda_kernels import cuda_kernel", True),
    ("from graders.model_engine.cuda_kernels import cuda_kernel as k", True),
    ("from graders.model_engine.cuda_kernels import CudaKernel", False),
    ("from graders.model_engine.cuda_kernels import cuda_kernel, NoGPU", False),
    ("from graders.model_engine import grade", False),
    ("import graders.model_engine.cuda_kernels", False),
])
def test_the_one_grader_import_a_cell_may_make_is_the_cuda_launcher(line, allowed):
    problems = source_problems(_cell("return x", before=line + "\n"))
    assert (problems == []) == allowed, problems
    if allowed:
        namespace = child.load_submission(_cell("return x", before=line + "\n")).forward.__globals__
        assert callable(namespace[line.split()[-1]])


def test_a_cuda_cpp_model_compiles_here_and_its_check_says_the_gpu_worker_runs_it():
    """No GPU here: the kernel compiles with NVRTC in the grading child; its launch cannot run, which the check
    says as ? (not ✗); a compile error is the model's, with NVRTC's line in the kernel's string."""
    mark, line = checked("kernelbench", "relu", ModelSource(CUDA_RELU))
    assert mark == "?" and "there is no GPU here to launch a CUDA C++ kernel on" in line, line
    broken = grade_model("kernelbench", "relu", ModelSource(CUDA_RELU.replace("out[i] =", "out[i] = y +")), **QUICK)
    assert broken.status == Status.COMPILE_ERROR and "CompileError" in broken.message, broken.message
    assert "line 4" in broken.message and "identifier \"y\" is undefined" in broken.message, broken.message


def test_launch_arguments_are_cuda_tensors_32_bit_ints_and_floats():
    from graders.model_engine.cuda_kernels import NoGPU, _dims, kernel_argument
    assert kernel_argument(7, 1) == 7 and kernel_argument(7, 1).dtype.name == "int32"
    assert kernel_argument(0.5, 2).dtype.name == "float32"
    with pytest.raises(NoGPU, match="argument 1 is a tensor on cpu"):
        kernel_argument(torch.zeros(2), 1)
    for value, why in [(1 << 31, "does not fit a 32-bit int"), (True, "is a bool"), ("x", "is a str")]:
        with pytest.raises(ValueError, match=why):
            kernel_argument(value, 3)
    assert _dims(4, "grid") == (4, 1, 1) and _dims((2, 3), "block") == (2, 3, 1)
    for bad in [(0,), (1, 2, 3, 4), (2.0,), ()]:
        with pytest.raises(ValueError, match="1 to 3 positive ints"):
            _dims(bad, "grid")


def test_a_model_that_asks_for_more_memory_than_its_cap_fails_alone(monkeypatch):
    """Its child's memory is capped (`MEMORY_BYTES`, here 2 GiB): on the CPU, each process's address space, so a
    3 GiB list fails as a MemoryError in forward (uncapped, it would be built and the output be wrong)."""
    from graders.model_engine import grade
    monkeypatch.setattr(grade, "MEMORY_BYTES", 2 << 30)
    hog = _cell(f"return x + len([0] * {(3 << 30) // 8})")
    result = grade_model("kernelbench", "relu", ModelSource(hog), **QUICK)
    assert result.status == Status.KERNEL_ERROR and "MemoryError" in result.message, result.message
    assert list(result.details["phases"]) == ["setup", "load", "trials", "child_start"]   # it failed in a trial


CACHE_PROBE = '''
import os
def handle(request):
    cache = os.environ.get("WORKSHOP_PROBED_CACHE", "")
    seen = {"sees_cache": os.path.exists(cache), "inductor_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")}
    if request["mode"] == "baseline":
        with open(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "compiled-by-the-baseline"), "w") as f:
            f.write("kept")
        return {"status": "ok", "message": "", "phases": {"compile": 0.1}, "timing": {
            "eager": {"median_s": 4e-3, "min_s": 4e-3, "runs": 3},
            "compile": {"median_s": 2e-3, "min_s": 2e-3, "runs": 3}}, "probe": seen}
    return {"status": "ok", "message": "", "device": "cpu", "trials": 3, "phases": {}, "probe": seen,
            "timing": {"submission": {"median_s": 1e-3, "min_s": 1e-3, "runs": 3}}}
'''


def test_only_the_baseline_child_writes_and_sees_the_compile_cache(tmp_path, monkeypatch):
    """The compile cache on the worker's disk (`grade.compile_cache`) is bound writable into the baseline child,
    where Inductor's cache points; the submission's child, graded in the same `grade_model`, neither sees it nor
    has it as its cache. A probe handler stands in for the model child, in the real sandbox."""
    from graders.model_engine import grade
    cache = tmp_path / "worker-cache"
    (tmp_path / "cache_probe.py").write_text(CACHE_PROBE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("WORKSHOP_COMPILE_CACHE", str(cache))
    monkeypatch.setattr(grade, "CHILD", "cache_probe")
    monkeypatch.setattr(grade, "_baselines", {})
    monkeypatch.setattr(grade, "_env", lambda device: grade._child_env() | {"TORCHINDUCTOR_CACHE_DIR": "/tmp/ind",
                                                                            "WORKSHOP_PROBED_CACHE": str(cache)})
    result = grade_model("kernelbench", "relu", ModelSource(SPEC.problem("relu").reference.read_text()),
                         compile=True, **QUICK)
    assert result.status == Status.OK and result.details["timing"]["speedup"]["compile"] == pytest.approx(2.0)
    assert result.details["probe"] == {"sees_cache": False, "inductor_dir": "/tmp/ind"}   # the submission's child
    assert (cache / "inductor" / "compiled-by-the-baseline").read_text() == "kept"   # the baseline child wrote it
    assert result.details["baseline"]["phases"] == {"compile": 0.1}


def test_the_baseline_compiles_in_its_own_process_into_the_cache_and_only_when_it_compiles(tmp_path, monkeypatch):
    from graders.model_engine import grade
    monkeypatch.setenv("WORKSHOP_COMPILE_CACHE", str(tmp_path / "cache"))
    assert grade._baseline_compile({"compile": False}) == ({}, ())
    assert not (tmp_path / "cache").exists()
    env, writable = grade._baseline_compile({"compile": True})
    assert writable == ((tmp_path / "cache").resolve(),)
    assert env == {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": str(writable[0] / "inductor"),
                   "TRITON_CACHE_DIR": str(writable[0] / "triton")}
    (tmp_path / "blocked").write_text("a file where the folder would be")
    monkeypatch.setenv("WORKSHOP_COMPILE_CACHE", str(tmp_path / "blocked"))
    assert grade._baseline_compile({"compile": True}) == ({"TORCHINDUCTOR_COMPILE_THREADS": "1"}, ())
