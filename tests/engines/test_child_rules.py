"""The CUDA grading child's rules pinned at their edges, on CPU tensors (`graders.cuda_engine.child`): what each
launch is given, what the timing answer holds, the tolerance and hardware-ceiling edges, the exact messages, and
`handle` and the GPU bench (`Harness`) with every CUDA call replaced by a recording stand-in.

tests/engines/test_cuda_child.py drives the phases with Python kernels; this file adds the edges it leaves open."""
from __future__ import annotations

import dataclasses
import math
import types

import numpy as np
import pytest
import torch

import graders.cuda_engine.timing
from graders import settings
from graders.cuda_engine import child, sass
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.result import Status

TRANSPOSE = load_spec("transpose")
PADDED = TRANSPOSE.kernel("padded")
SAMPLES = 4


class Timer(graders.cuda_engine.timing.Timer):
    """The grader's timer with a stand-in clock: ``SAMPLES`` samples a subject, the kernel 1 ms, the baseline 3 ms."""

    l2_bytes = 1234

    def timed(self, name: str, run) -> float:
        run()
        return {"baseline": 3e-3, "kernel": 1e-3}[name]

    def measure(self, budget_s: float):
        return super().measure(budget_s, min_samples=SAMPLES, max_samples=SAMPLES)


class Bench(child.Bench):
    """The child's bench on the CPU with a transpose that records the shape of every launch."""

    def __init__(self, definition=None, peaks=None):
        super().__init__(definition or problem("transpose"), PADDED.geometry, seed=11)
        self.shapes, self.device_peaks = [], peaks or {}

    def load(self, source, function):
        return {}

    def launch(self, out, inputs, shape):
        self.shapes.append(shape)
        out.copy_(inputs[0].t())

    def timer(self, subjects):
        return Timer(subjects)

    def peaks(self):
        return self.device_peaks


KERNEL = dataclasses.replace(PADDED, check_shapes=((3, 5), (1, 1)), perf_shape=(6, 4))


def test_every_launch_is_given_the_shape_it_runs_at():
    bench = Bench()
    assert child.check_and_time(bench, KERNEL, "src", 1.0)["status"] == Status.OK
    assert bench.shapes == [(3, 5), (1, 1)] + [(6, 4)] * SAMPLES + [(6, 4), (3, 5), (1, 1)]


def test_the_timing_answer_holds_both_subjects_the_ratio_and_the_work():
    timing = Bench().time((6, 4), 1.0)
    work = 2 * 4 * 6 * 4          # transpose: read and write 24 fp32 values
    stats = {"rse": 0.0, "samples": SAMPLES, "converged": True}
    assert timing == {
        "shape": [6, 4], "verified_launches": SAMPLES, "l2_bytes": 1234, "work_unit": "B", "ratio": 3.0,
        "baseline": {"median_s": 3e-3, "mean_s": 3e-3, **stats, "throughput": work / 3e-3,
                     "name": "device-to-device copy"},
        "kernel": {"median_s": 1e-3, "mean_s": 1e-3, **stats, "throughput": work / 1e-3},
        "ceiling": {}}
    assert problem("transpose").baseline_name == "device-to-device copy"


def test_the_baseline_is_timed_on_fresh_inputs_into_a_poisoned_output():
    seen = []

    def baseline(out, inputs):
        seen.append((bool(torch.isnan(out).all()), inputs[0].clone()))
        out.copy_(inputs[0].t())
    Bench(dataclasses.replace(problem("transpose"), baseline=baseline)).time((6, 4), 1.0)
    assert len(seen) == SAMPLES and all(poisoned for poisoned, _ in seen)
    assert all(not torch.equal(seen[i][1], seen[i + 1][1]) for i in range(SAMPLES - 1))


def test_a_ceiling_is_reported_only_for_the_problems_own_roof():
    assert Bench(peaks={"dram": 5.0}).ceiling() == {"roof": "dram", "throughput": 5.0}
    assert Bench(peaks={"fp32": 5.0}).ceiling() == {}
    roofless = dataclasses.replace(problem("transpose"), roof=None)
    assert Bench(roofless, peaks={"": 5.0, "dram": 5.0}).ceiling() == {"roof": None, "throughput": 5.0}


# --- the hardware ceiling -----------------------------------------------------------------------------

def timing_at(throughput: float, ceiling: float, roof: str = "dram", unit: str = "B") -> dict:
    return {"kernel": {"throughput": throughput, "median_s": 2.5e-4}, "work_unit": unit,
            "ceiling": {"roof": roof, "throughput": ceiling}}


@pytest.mark.parametrize("factor, over", [(0.9, False), (1.0, False), (1.1, True)])
def test_a_throughput_above_the_ceiling_and_only_above_it_is_implausible(factor, over):
    assert bool(child.implausible(timing_at(4.8e12 * factor, 4.8e12))) == over


@pytest.mark.parametrize("roof, unit, what", [
    ("dram", "B", "the memory's peak bandwidth"),
    ("fp32", "FLOP", "the FP32 pipes' peak rate"),
    ("tensor", "FLOP", "tensor"),      # a roof without a sentence of its own is named as it is
])
def test_an_implausible_time_names_the_ceiling_it_is_above(roof, unit, what):
    assert child.implausible(timing_at(2000.5000005e9, 1000.5000005e9, roof, unit)) == (
        f"your kernel's median time, 0.25 ms, means 2001 G{unit}/s, above {what} on this GPU (1001 G{unit}/s): no "
        "kernel that does the work is that fast, so its speed is not credited (tensor cores in an FP32 step, or "
        "work done outside the timed launch?)")


def test_without_a_ceiling_nothing_is_implausible():
    assert child.implausible({"kernel": {"throughput": 1e30}, "ceiling": {}}) == ""
    assert child.implausible({"kernel": {"throughput": 1e30}}) == ""


# --- guards, mismatches and tolerances -------------------------------------------------------------------

def guarded(n: int):
    buffer = torch.empty(n + 2 * child.GUARD_ELEMENTS, dtype=torch.float32)
    buffer.view(torch.int32).fill_(child.CANARY)
    return buffer


def test_guard_damage_on_both_sides_names_the_first_after_and_the_nearest_before():
    buffer, n, g = guarded(10), 10, child.GUARD_ELEMENTS
    for offset in (n + 3, n + 7, -5, -2):
        buffer[g + offset] = 1.0
    assert child.guard_damage(buffer) == (
        "2 value(s) after the end of the output (the first at flat index 13 of an output of 10 elements); "
        "2 value(s) before its start (the nearest at flat index -2)")
    edges = guarded(10)
    edges[0] = edges[-1] = 1.0       # the outermost canaries count too
    assert child.guard_damage(edges) == (
        f"1 value(s) after the end of the output (the first at flat index {g - 1 + n} of an output of 10 elements); "
        f"1 value(s) before its start (the nearest at flat index {-g})")


def test_the_output_body_is_poisoned_and_only_the_guards_hold_canaries():
    buffer, out = Bench().output((3, 5))
    assert out.shape == (5, 3) and torch.isnan(out).all() and child.guard_damage(buffer) == ""
    assert buffer.view(torch.int32)[child.GUARD_ELEMENTS - 1] == child.CANARY


ATOL = 1e-3


@pytest.mark.parametrize("factor, wrong", [(0.0, False), (0.9, False), (1.1, True), (-0.9, False), (-1.1, True)])
def test_a_tolerance_holds_within_it_and_fails_just_past_it(factor, wrong):
    expected = torch.linspace(-1000, 1000, 12).view(3, 4)    # large values: a relative tolerance would show
    out = expected.clone()
    out[1, 2] += factor * ATOL
    message = child.mismatch(out, expected, ATOL)
    assert bool(message) == wrong
    if wrong:
        assert message.startswith("1 of 12 values wrong; first at out[1][2]: expected ")
        assert message.endswith(f"got {float(out[1, 2]):.6g}")


def test_without_a_tolerance_one_ulp_is_wrong_and_shown_to_nine_digits():
    expected = torch.ones(2, 3)
    out = expected.clone()
    out[0, 1] = torch.nextafter(torch.tensor(1.0), torch.tensor(2.0))
    out[1, 2] = 5.0
    assert child.mismatch(out, expected, 0.0) == ("2 of 6 values wrong; first at out[0][1]: expected 1, got "
                                                  "1.00000012")
    out[0, 1] = 1.0
    assert child.mismatch(out, expected, 0.0) == "1 of 6 values wrong; first at out[1][2]: expected 1, got 5"


def test_a_problem_is_judged_by_its_own_tolerance_or_its_own_compare():
    expected = torch.zeros(4)
    close = expected + 0.9 * ATOL
    lenient = dataclasses.replace(problem("copy"), atol=ATOL)
    assert child.verdict(lenient, close, expected) == ""
    assert child.verdict(problem("copy"), close, expected).startswith("4 of 4 values wrong")
    custom = dataclasses.replace(problem("copy"), atol=ATOL, compare=lambda out, want: f"{out.numel()} judged")
    assert child.verdict(custom, expected, expected) == "4 judged"


@pytest.mark.parametrize("exc, cuda", [
    (RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS"), True),
    (type("CUDAError", (Exception,), {})("an illegal memory access"), True),
    (type("CudaError", (Exception,), {})("an illegal memory access"), False),
    (ValueError("a bug in the grader"), False),
])
def test_a_cuda_error_is_told_by_its_type_or_its_message(exc, cuda):
    assert child._is_cuda_error(exc) == cuda


def test_a_cuda_error_named_only_by_its_type_is_a_crash():
    class CUDAError(Exception):
        pass

    class Crashing(Bench):
        def launch(self, out, inputs, shape):
            raise CUDAError("an illegal memory access was encountered")
    answer = child.check_and_time(Crashing(), KERNEL, "src", 1.0)
    assert list(answer.pop("phases")) == ["compile", "correctness"]
    assert answer == {
        "compile": {}, "checks": [], "status": Status.CRASHED,
        "message": "CUDA error while checking correctness: an illegal memory access was encountered"}


# --- handle: the request read, with the GPU bench and the phases replaced ---------------------------------

@pytest.fixture
def gpu(monkeypatch):
    """`handle` on this machine: a CUDA device that is "available", a recording stand-in for `Harness` and for
    `check_and_time`, and a fixed environment."""
    calls = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(graders.cuda_engine.timing, "environment", lambda: {"gpu": "stand-in"})

    def harness(*args):
        calls["harness"] = args
        if "harness_error" in calls:
            raise calls["harness_error"]
        return "the harness"
    monkeypatch.setattr(child, "Harness", harness)

    def check_and_time(*args):
        calls["check_and_time"] = args
        return {"status": Status.OK, "message": "", "phases": {"compile": 1.5}}
    monkeypatch.setattr(child, "check_and_time", check_and_time)
    return calls


def request(**fields) -> dict:
    return {"spec_path": str(TRANSPOSE.path), "kernel_id": "padded", "source": "src", "seed": "42"} | fields


def test_handle_grades_the_requested_kernel_with_the_defaults(gpu):
    answer = child.handle(request())
    phases = answer.pop("phases")
    assert list(phases) == ["setup", "cuda_start", "compile"] and phases["compile"] == 1.5
    assert answer == {
        "kernel_id": "padded", "geometry": {"block": list(PADDED.geometry.block), "tile": list(PADDED.geometry.tile)},
        "seed": 42, "environment": {"gpu": "stand-in"}, "status": Status.OK, "message": ""}
    definition, geometry, memory_fraction, seed, features, launch_timeout = gpu["harness"]
    assert definition == problem("transpose") and geometry == PADDED.geometry and features == PADDED.launch
    assert (memory_fraction, seed, launch_timeout) == (0.25, 42, settings.DEFAULT_LAUNCH_TIMEOUT_S)
    assert isinstance(memory_fraction, float)
    assert gpu["check_and_time"] == ("the harness", PADDED, "src", 10.0)


def test_handle_passes_the_students_launch_budget_memory_fraction_and_launch_limit(gpu):
    gemm = load_spec("gemm")
    tuned = gemm.kernel("autotuned")
    assert tuned.geometry.block != (8, 32)
    answer = child.handle(request(spec_path=str(gemm.path), kernel_id="autotuned", block=[8, 32],
                                  tile=[128, 64], params={"BK": 16}, budget_s="2.5", memory_fraction="0.5",
                                  launch_timeout_s="3"))
    assert answer["kernel_id"] == "autotuned"
    assert answer["geometry"] == {"block": [8, 32], "tile": [128, 64], "params": {"BK": 16}}
    geometry = resolve_geometry(tuned, [8, 32], [128, 64], {"BK": 16})
    assert gpu["harness"] == (problem("sgemm"), geometry, 0.5, 42, tuned.launch, 3.0)
    assert gpu["check_and_time"] == ("the harness", tuned, "src", 2.5)


def test_handle_without_a_gpu_says_so(gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert child.handle(request()) == {"status": Status.NO_GPU, "message": "the grading process found no CUDA GPU"}
    assert gpu == {}


def test_a_cuda_error_while_starting_is_a_crash_and_any_other_error_the_graders(gpu):
    gpu["harness_error"] = RuntimeError("CUDA driver version is insufficient")
    answer = child.handle(request())
    assert answer["status"] == Status.CRASHED and answer["seed"] == 42 and "environment" not in answer
    assert answer["message"] == "CUDA error while starting CUDA: CUDA driver version is insufficient"
    gpu["harness_error"] = ValueError("a bug in the grader")
    with pytest.raises(ValueError, match="a bug in the grader"):
        child.handle(request())


# --- the GPU bench: each CUDA call replaced by a recording stand-in -----------------------------------------

class Recorder:
    """Records every call made to it (and to its attributes) as (name, args, kwargs)."""

    def __init__(self, name="", log=None, returns=None):
        self.name, self.log, self.returns = name, [] if log is None else log, returns or {}

    def __getattr__(self, attr):
        return Recorder(f"{self.name}.{attr}".lstrip("."), self.log, self.returns)

    def __call__(self, *args, **kwargs):
        self.log.append((self.name, args, kwargs))
        return self.returns.get(self.name, Recorder(f"{self.name}()", self.log, self.returns))


class CpuHarness(child.Harness):
    device = "cpu"     # the bench's own tensors stay on the CPU; every torch.cuda call is a stand-in


@pytest.fixture
def cuda(monkeypatch):
    """torch.cuda's calls, cuda.core's Device, LaunchConfig and launch replaced by one `Recorder`."""
    log: list = []
    returns = {"get_device_capability": (9, 0)}
    recorder = Recorder(log=log, returns=returns)
    for name in ("set_device", "init", "set_per_process_memory_fraction", "ExternalStream", "stream", "synchronize",
                 "empty_cache", "get_device_capability"):
        monkeypatch.setattr(torch.cuda, name, getattr(recorder, name))
    for name in ("Device", "LaunchConfig", "launch"):
        monkeypatch.setattr(child, name, getattr(recorder, name))
    return log, returns


def test_the_gpu_bench_starts_cuda_capped_on_its_own_stream(cuda):
    log, returns = cuda
    returns["Device().create_stream"] = stream = types.SimpleNamespace(handle=77)
    bench = CpuHarness(problem("transpose"), PADDED.geometry, memory_fraction=0.3, seed=5)
    assert [(name, args) for name, args, _ in log] == [
        ("set_device", (0,)), ("init", ()), ("set_per_process_memory_fraction", (0.3,)), ("Device", (0,)),
        ("Device().set_current", ()), ("Device().create_stream", ()), ("ExternalStream", (77,))]
    assert bench.stream is stream and bench.torch_stream.name == "ExternalStream()"
    assert bench.cuda_device.name == "Device()"
    assert bench.kernel is None and bench.compiled is None and bench.problem == problem("transpose")
    assert bench.generator.initial_seed() == 5 and bench.geometry == PADDED.geometry


def bare_harness(definition=None, geometry=None):
    """A `Harness` built without starting CUDA: its stream and kernel are markers."""
    bench = object.__new__(CpuHarness)
    bench.torch, bench.problem = torch, definition or problem("transpose")
    bench.geometry = geometry or PADDED.geometry
    bench.stream, bench.torch_stream, bench.kernel = "the stream", "the torch stream", "the kernel"
    return bench


def test_a_launch_passes_the_grid_block_pointers_and_sizes_in_order(cuda):
    log, _ = cuda
    bench = bare_harness()
    out, a = torch.empty(5, 3), torch.empty(3, 5)
    bench.launch(out, [a], (3, 5))
    (config_name, config_args, config), (launch_name, args, kwargs) = log
    assert config_name == "LaunchConfig" and config_args == ()
    assert config == {"grid": problem("transpose").grid((3, 5), PADDED.geometry.tile),
                      "block": (*PADDED.geometry.block, 1)}
    assert launch_name == "launch" and kwargs == {}
    assert args[0] == "the stream" and args[2] == "the kernel" and args[1].name == "LaunchConfig()"
    pointers, sizes = args[3:5], args[5:]
    assert [type(p) for p in pointers] == [np.uint64, np.uint64]
    assert [int(p) for p in pointers] == [out.data_ptr(), a.data_ptr()]
    assert [type(s) for s in sizes] == [np.int32, np.int32] and [int(s) for s in sizes] == [3, 5]


def test_a_kernel_is_compiled_for_this_gpu_with_the_launch_defines(cuda, monkeypatch):
    compiled = Recorder(returns={"object_code.get_kernel": "the kernel", "resources_dict": {"r": 1}})
    compiled.arch = "sm_90"
    calls = []
    monkeypatch.setattr(child, "compile_cuda", lambda source, **options: calls.append((source, options)) or compiled)
    bench = bare_harness()
    assert bench.arch == "sm_90"
    assert bench.load("src", "transpose_padded") == {"arch": "sm_90", "resources": {"r": 1}}
    assert calls == [("src", {"kernels": ("transpose_padded",), "defines": PADDED.geometry.defines(),
                              "arch": "sm_90", "lineinfo": False,   # line information only for a tool's report
                              "libraries": ()})]                    # header libraries only where the spec names them
    assert bench.kernel == "the kernel" and bench.compiled is compiled
    assert ("object_code.get_kernel", ("transpose_padded",), {}) in compiled.log


def test_the_sass_requirements_of_the_problem_are_checked_on_the_cubin(monkeypatch):
    calls = []
    monkeypatch.setattr(sass, "check", lambda *a, **k: calls.append((a, k)) or (["uses tensor cores"], {}))
    bench = bare_harness(problem("sgemm"))
    bench.compiled = type("Compiled", (), {"cubin": b"ELF"})()
    assert bench.sass_failures("sgemm_naive") == ["uses tensor cores"]
    assert calls == [((b"ELF", "sgemm_naive", ("no_tensor_cores",)), {"disassemble_always": False})]


def test_the_gpu_bench_times_syncs_and_releases_through_cuda(cuda, monkeypatch):
    log, _ = cuda
    monkeypatch.setattr(graders.cuda_engine.timing, "CudaTimer", lambda subjects, stream: ("timer", subjects, stream))
    monkeypatch.setattr(graders.cuda_engine.timing, "peaks", lambda: {"dram": 1.0})
    monkeypatch.setattr(graders.cuda_engine.timing, "clocks", lambda: {"sm": 2})
    bench = bare_harness()
    assert bench.timer({"k": 1}) == ("timer", {"k": 1}, "the torch stream")
    assert bench.peaks() == {"dram": 1.0} and bench.clocks() == {"sm": 2}
    bench.enqueue()
    bench.synchronize()
    bench.release()
    assert [(name, args) for name, args, _ in log] == [("stream", ("the torch stream",)), ("synchronize", ()),
                                                       ("empty_cache", ())]


def test_a_time_is_credited_exactly_up_to_the_ceiling():
    work = 2 * 4 * 6 * 4 / 1e-3      # Timer's kernel: 1 ms at 6 x 4
    for peak, status in [(work, Status.OK), (work * 1.1, Status.OK), (work * 0.9, Status.IMPLAUSIBLE)]:
        answer = child.check_and_time(Bench(peaks={"dram": peak}), KERNEL, "src", 1.0)
        assert answer["status"] == status and (answer["message"] == "") == (status == Status.OK)
    assert math.isclose(work, 192_000)


# --- check_and_time: what reaches the bench, and the answer's fields ---------------------------------------

class Recording(Bench):
    """A bench that records the function it loads and checks, reports clocks, and can fail its SASS check."""

    def __init__(self, sass=(), load_error=None):
        super().__init__(dataclasses.replace(problem("transpose"), sass_requirements=("no_local", "ldg128")))
        self.functions, self.unmet, self.load_error = [], list(sass), load_error

    def load(self, source, function):
        self.functions.append(("load", source, function))
        if self.load_error:
            raise self.load_error
        return {"arch": "sm_90"}

    def sass_failures(self, function):
        self.functions.append(("sass", function))
        return self.unmet

    def clocks(self):
        return {"sm_mhz": 1980}


def test_the_kernels_function_is_loaded_and_checked_and_the_clocks_recorded():
    bench = Recording()
    answer = child.check_and_time(bench, KERNEL, "src", 1.0)
    assert bench.functions == [("load", "src", KERNEL.function), ("sass", KERNEL.function)]
    assert answer["status"] == Status.OK and answer["clocks_after"] == {"sm_mhz": 1980}
    assert answer["sass"] == {"requirements": ["no_local", "ldg128"], "unmet": []}
    assert answer["compile"] == {"arch": "sm_90"}


def test_every_unmet_requirement_is_named():
    answer = child.check_and_time(Recording(sass=["no LDG.128", "a stack frame"]), KERNEL, "src", 1.0)
    assert answer["status"] == Status.UNMET
    assert answer["message"] == "correct, but no LDG.128; a stack frame. Its speed is not credited"


def test_a_cuda_error_while_loading_is_a_crash_while_compiling():
    answer = child.check_and_time(Recording(load_error=RuntimeError("CUDA_ERROR_INVALID_IMAGE")), KERNEL, "src", 1.0)
    assert list(answer.pop("phases")) == ["compile"]
    assert answer == {"status": Status.CRASHED, "message": "CUDA error while compiling: CUDA_ERROR_INVALID_IMAGE"}


def test_the_output_is_fp32_on_the_benchs_device_whatever_torchs_defaults():
    class MetaBench(Bench):
        device = "meta"      # shapes and dtypes only: shows the device each buffer is made on
    bench = object.__new__(MetaBench)
    bench.torch, bench.problem = torch, problem("transpose")
    buffer, out = bench.output((3, 5))
    assert buffer.device.type == out.device.type == "meta"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        buffer, out = Bench().output((3, 5))
    finally:
        torch.set_default_dtype(default)
    assert buffer.dtype == out.dtype == torch.float32


def test_each_check_records_its_shape_status_and_message():
    assert Bench().check((3, 5)) == {"shape": [3, 5], "ok": True, "status": Status.OK, "message": ""}

    class PastTheEnd(Bench):
        def launch(self, out, inputs, shape):
            super().launch(out, inputs, shape)
            torch.as_strided(out, (1,), (1,), out.storage_offset() + out.numel()).fill_(0.0)
    assert PastTheEnd().check((3, 5)) == {
        "shape": [3, 5], "ok": False, "status": Status.OOB_WRITE,
        "message": "at shape 3x5 your kernel wrote outside its output: 1 value(s) after the end of the output (the "
                   "first at flat index 15 of an output of 15 elements)"}
