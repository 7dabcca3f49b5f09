"""What the measurement is measured against, observed on the CPU: the precision cuBLAS is left to use while a GEMM
baseline runs, and the hardware ceilings (`graders.cuda_engine.timing.peaks`) that decide when a kernel is too fast
to be honest.

The baselines run under `CublasOnCpu`, which reads torch's TF32 switch at the moment of each matrix product (what
cuBLAS reads then) and computes as cuBLAS would under it. The ceilings come from `timing.peaks` with cuda.core's
device faked as GPUs whose clocks, widths and datasheet figures are known; a kernel timed at the problem's minimum
work is then graded just above and just below the datasheet's figure, through the grading child's phases."""
from __future__ import annotations

import dataclasses
import sys
from types import SimpleNamespace

import cuda.core
import pytest
import torch
from torch.overrides import TorchFunctionMode

from graders import tracks
from graders.cuda_engine import child, timing
from graders.cuda_engine.problems import kinds, problem
from graders.cuda_engine.spec import KernelSpec, load_spec
from graders.result import Status

# --- the GEMM baselines' precision ---------------------------------------------------------------------


def tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to TF32 as the tensor cores take it (cvt.rna.tf32.f32: 10 significand bits, ties away)."""
    return ((x.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


class CublasOnCpu(TorchFunctionMode):
    """cuBLAS's stand-in on the CPU: at every matrix product it records whether torch lets cuBLAS use TF32 then
    (``torch.backends.cuda.matmul.allow_tf32``, the switch torch's cuBLAS calls read; torch refuses to answer,
    and so would the GPU's matmul, when the legacy and new precision settings disagree) and computes as cuBLAS
    would: on inputs rounded to TF32 where it may. A product by a function not in PRODUCTS goes unrecorded, so
    a test that expects one recorded product fails on it rather than passing unseen."""

    PRODUCTS = {"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "linear", "einsum",
                "tensordot"}

    def __init__(self):
        super().__init__()
        self.tf32: list[bool | str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") not in self.PRODUCTS:
            return func(*args, **(kwargs or {}))
        try:
            allowed = torch.backends.cuda.matmul.allow_tf32
        except RuntimeError as exc:   # legacy and new settings mixed: torch's cuBLAS path raises the same
            self.tf32.append(str(exc))
            raise
        self.tf32.append(allowed)
        if allowed:
            args = tuple(tf32(a) if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a for a in args)
        return func(*args, **(kwargs or {}))


def _tf32_on_by_legacy_flag():
    torch.backends.cuda.matmul.allow_tf32 = True      # what the tf32gemm baseline leaves behind


def _tf32_on_by_new_api():
    torch.backends.cuda.matmul.fp32_precision = "tf32"


def _tf32_on_for_every_backend():
    torch.backends.fp32_precision = "tf32"


def _tf32_off_by_new_api():
    torch.backends.cuda.matmul.fp32_precision = "ieee"


BEFORE = {   # what the process may have set before the baseline runs
    "torch-defaults": lambda: None,
    "allow_tf32": _tf32_on_by_legacy_flag,
    "precision-high": lambda: torch.set_float32_matmul_precision("high"),
    "precision-medium": lambda: torch.set_float32_matmul_precision("medium"),
    "cuda-matmul-fp32_precision-tf32": _tf32_on_by_new_api,
    "backends-fp32_precision-tf32": _tf32_on_for_every_backend,
    "cuda-matmul-fp32_precision-ieee": _tf32_off_by_new_api,
    "precision-highest": lambda: torch.set_float32_matmul_precision("highest"),
}


@pytest.fixture
def precision_restored():
    """torch's precision settings back at their defaults after the test (set in this order, no mix remains)."""
    reduced_fp16 = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    yield
    torch.backends.fp32_precision = "none"
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.fp32_precision = "none"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = reduced_fp16
    assert (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()) == (False, "highest")


def gemm_inputs(kind: str, shape=(96, 64, 512), seed=3) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The kind's own inputs at ``shape`` (M, N, K) on the CPU, and an output for them."""
    definition = problem(kind)
    inputs = definition.make_inputs(shape, torch.Generator().manual_seed(seed))
    return inputs, torch.empty(definition.out_shape(shape))


@pytest.mark.parametrize("before", BEFORE.values(), ids=BEFORE.keys())
def test_the_sgemm_baseline_multiplies_in_fp32_whatever_the_process_set_before(before, precision_restored):
    inputs, out = gemm_inputs("sgemm")
    sgemm = problem("sgemm")
    before()
    with CublasOnCpu() as cublas:
        sgemm.baseline(out, inputs)
    assert cublas.tf32 == [False]
    assert sgemm.compare(out, sgemm.reference(inputs)) == ""


def test_the_sgemm_baseline_switches_tf32_off_on_every_call(precision_restored):
    inputs, out = gemm_inputs("sgemm")
    with CublasOnCpu() as cublas:
        for _ in range(2):
            problem("sgemm").baseline(out, inputs)
            torch.backends.cuda.matmul.allow_tf32 = True     # a later subject's setting, before the next sample
    assert cublas.tf32 == [False, False]


@pytest.mark.parametrize("before", BEFORE.values(), ids=BEFORE.keys())
def test_the_tf32_baseline_multiplies_on_tf32_whatever_the_process_set_before(before, precision_restored):
    inputs, out = gemm_inputs("tf32gemm")
    before()
    with CublasOnCpu() as cublas:
        problem("tf32gemm").baseline(out, inputs)
    assert cublas.tf32 == [True]
    assert torch.equal(out, tf32(inputs[0]) @ tf32(inputs[1]))


def test_tf32_shows_at_the_shape_the_baselines_are_checked_at(precision_restored):
    """The stand-in's TF32 product fails the fp32 tolerance at this shape: a TF32 baseline would fail above."""
    inputs, out = gemm_inputs("sgemm")
    sgemm = problem("sgemm")
    with CublasOnCpu() as cublas:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.matmul(inputs[0], inputs[1], out=out)
    assert cublas.tf32 == [True]
    assert "relative Frobenius error" in sgemm.compare(out, sgemm.reference(inputs))


@pytest.mark.gpu
def test_on_the_gpu_the_sgemm_baseline_is_fp32_where_tf32_was_on_and_shows(precision_restored):
    shape = (512, 512, 4096)
    sgemm = problem("sgemm")
    inputs = sgemm.make_inputs(shape, torch.Generator(device="cuda").manual_seed(5))
    out = torch.empty(sgemm.out_shape(shape), device="cuda")
    expected = sgemm.reference(inputs)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.matmul(inputs[0], inputs[1], out=out)
    assert "relative Frobenius error" in sgemm.compare(out, expected)   # this GPU's cuBLAS does use TF32 then
    sgemm.baseline(out, inputs)
    assert sgemm.compare(out, expected) == ""


# --- the hardware ceilings -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Gpu:
    """What CUDA reports for a GPU (clocks in kHz, the memory bus in bits) and its datasheet's peaks."""

    memory_clock_khz: int
    bus_bits: int
    sm_clock_khz: int
    sms: int
    compute_capability: tuple[int, int]
    datasheet_dram: float    # bytes/s
    datasheet_fp32: float    # FLOP/s

    def device(self, ordinal: int):
        """A stand-in for ``cuda.core.Device(ordinal)`` on this GPU."""
        assert ordinal == 0
        return SimpleNamespace(compute_capability=self.compute_capability, properties=SimpleNamespace(
            memory_clock_rate=self.memory_clock_khz, global_memory_bus_width=self.bus_bits,
            clock_rate=self.sm_clock_khz, multiprocessor_count=self.sms))


GPUS = {
    # The H200 as its GPU records show it (e.g. attention-gpu-20261203-230419.json's environment: NVML's memory
    # clock 3201 MHz, SM clock 1980 MHz, 132 SMs, peaks 4814304000000 B/s = 3201 MHz x 2 x 6016 bits / 8);
    # datasheet 4.8 TB/s HBM3e, 67 TFLOP/s FP32.
    "H200": Gpu(3_201_000, 6016, 1_980_000, 132, (9, 0), 4.8e12, 67e12),
    "H100-SXM": Gpu(2_619_000, 5120, 1_980_000, 132, (9, 0), 3.35e12, 67e12),    # HBM3
    "A100-SXM-80GB": Gpu(1_593_000, 5120, 1_410_000, 108, (8, 0), 2.039e12, 19.5e12),   # HBM2e, 64 FP32 lanes/SM
    "RTX-3090": Gpu(9_751_000, 384, 1_695_000, 82, (8, 6), 936e9, 35.6e12),      # GDDR6X, 128 FP32 lanes/SM
}


@pytest.fixture(params=GPUS.values(), ids=GPUS.keys())
def gpu(request, monkeypatch) -> Gpu:
    """cuda.core's device (what `timing.peaks` reads) faked as one of GPUS."""
    monkeypatch.setattr(cuda.core, "Device", request.param.device)
    return request.param


def test_the_ceilings_are_the_datasheets(gpu):
    found = timing.peaks()
    assert set(found) == {"dram", "fp32"}
    assert found["dram"] == pytest.approx(gpu.datasheet_dram, rel=0.01)
    assert found["fp32"] == pytest.approx(gpu.datasheet_fp32, rel=0.01)


def test_the_h200_ceilings_are_those_its_records_show(monkeypatch):
    monkeypatch.setattr(cuda.core, "Device", GPUS["H200"].device)
    assert timing.peaks() == {"dram": 4814304000000.0, "fp32": 66908160000000.0}


def test_a_ceiling_the_device_does_not_report_is_left_out(monkeypatch):
    no_memory = dataclasses.replace(GPUS["H200"], memory_clock_khz=0)
    monkeypatch.setattr(cuda.core, "Device", no_memory.device)
    assert set(timing.peaks()) == {"fp32"}


DATASHEETS = {"NVIDIA H200": GPUS["H200"], "NVIDIA H100 80GB HBM3": GPUS["H100-SXM"],
              "NVIDIA A100-SXM4-80GB": GPUS["A100-SXM-80GB"], "NVIDIA GeForce RTX 3090": GPUS["RTX-3090"]}


@pytest.mark.gpu
def test_on_the_gpu_the_ceilings_are_the_datasheets():
    name = torch.cuda.get_device_name(0)
    if name not in DATASHEETS:
        pytest.skip(f"no datasheet figures here for {name}")
    found, datasheet = timing.peaks(), DATASHEETS[name]
    assert found["dram"] == pytest.approx(datasheet.datasheet_dram, rel=0.01)
    assert found["fp32"] == pytest.approx(datasheet.datasheet_fp32, rel=0.01)


# Each roofed kind's ceiling, and the least work a correct kernel of it does at a shape: the bytes it must move
# (every input read once, the output written once) or the FLOPs it must do, counted here from the kinds'
# definitions, not from Problem.work.
SERVING_LENGTHS = tracks.get("serving").problem_module().sequence_lengths   # paged decode's lengths, fixed by its shape
LEAST_WORK = {
    "vecadd": ("dram", lambda n: 3 * 4 * n),                            # fp32 a and b read, out written
    "copy": ("dram", lambda rows, cols: 2 * 4 * rows * cols),           # fp32 in read, out written
    "transpose": ("dram", lambda rows, cols: 2 * 4 * rows * cols),
    "row_softmax": ("dram", lambda rows, cols: 2 * 4 * rows * cols),
    "attention_decode": ("dram", lambda b, h, seq_k, d: b * h * d * (2 * 2 * seq_k + 2 + 4)),  # bf16 K V q, fp32 out
    "sgemm": ("fp32", lambda m, n, k: 2 * m * n * k),                   # M N K multiply-adds
    "row_sum": ("dram", lambda rows, cols: 4 * rows * cols + 4 * rows),   # fp32 x read, one sum a row written
    "copy_rows": ("dram", lambda rows, cols: 2 * 4 * rows * cols),
    # e2m1 codes (half a byte each) and e4m3 scales (a byte per 16) read, the fp32 tensor scale and x read, y written
    "nvfp4_gemv": ("dram", lambda m, k: m * k // 2 + m * k // 16 + 4 + 4 * k + 4 * m),
    # bf16 x and residual read, h and y written, the bf16 weight read once
    "rmsnorm_residual": ("dram", lambda rows, cols: 4 * 2 * rows * cols + 2 * cols),
    "swiglu": ("dram", lambda tokens, d: 2 * 2 * tokens * d + 2 * tokens * d),   # bf16 gate and up read, out written
    # each sequence's live tokens of bf16 K and V read once (its length from the inputs' definition), bf16 q read, fp32
    # out written, the block table's entries for those pages and the lengths read (int32)
    "paged_decode": ("dram", lambda b, qh, kvh, max_len, d, page: sum(
        4 * n * kvh * d + 4 * -(-n // page) for n in SERVING_LENGTHS((b, qh, kvh, max_len, d, page)))
        + b * qh * d * (2 + 4) + 4 * b),
    # int4 codes (half a byte each) and an fp16 scale per 128 read, fp16 x read, fp32 y written
    "w4a16_gemv": ("dram", lambda b, n, k: n * k // 2 + 2 * n * k // 128 + 2 * b * k + 4 * b * n),
}


def roofed_kernels() -> dict[str, KernelSpec]:
    """A kernel of each roofed kind at each perf shape a track's spec times it at, by kind and shape."""
    found = {}
    for track in tracks.all_tracks():
        if track.engine != "cuda":
            continue
        for kernel in load_spec(track.name).kernels.values():
            if problem(kernel.kind).roof:
                found.setdefault(f"{kernel.kind}-{'x'.join(map(str, kernel.perf_shape))}", kernel)
    return found


ROOFED = roofed_kernels()


def test_every_roofed_kind_has_its_least_work_here_and_a_spec_that_times_it():
    assert {kind for kind in kinds() if problem(kind).roof} == set(LEAST_WORK)
    assert {kernel.kind for kernel in ROOFED.values()} == set(LEAST_WORK)


class Clock(timing.Timer):
    """The grader's timer with a stand-in clock: every launch of every subject takes ``seconds``."""

    def __init__(self, subjects, seconds: float):
        super().__init__(subjects)
        self.seconds = seconds

    def timed(self, name, run):
        run()
        return self.seconds

    def measure(self, budget_s):
        return super().measure(budget_s, min_samples=3, max_samples=3)


class TimedBench(child.Bench):
    """The grading child's bench on the CPU, with the GPU bench's ceilings (`child.Harness.peaks`, from the faked
    device) and a kernel that takes ``seconds`` a launch. Its inputs, output and check are one-value stand-ins:
    the ceiling depends on the shape only through the problem's work and roof, which stay the kind's own."""

    peaks = child.Harness.peaks

    def __init__(self, kind: str, seconds: float):
        light = dataclasses.replace(problem(kind), make_inputs=lambda shape, gen: [], out_shape=lambda shape: (1,),
                                    reference=lambda inputs: None, baseline=lambda out, inputs: None,
                                    compare=lambda out, expected: "")
        super().__init__(light, geometry=None, seed=0)
        self.seconds = seconds

    def load(self, source, function):
        return {}

    def launch(self, out, inputs, shape):
        out.fill_(0.0)

    def timer(self, subjects):
        return Clock(subjects, self.seconds)


@pytest.mark.parametrize("kernel", ROOFED.values(), ids=ROOFED.keys())
@pytest.mark.parametrize("share, status", [(1.1, Status.IMPLAUSIBLE), (0.9, Status.OK)], ids=["1.1x", "0.9x"])
def test_a_kernel_faster_than_the_datasheet_is_implausible_and_one_at_90_percent_is_not(monkeypatch, kernel, share,
                                                                                        status):
    """On the H200 (the other GPUs' ceilings differ only in `timing.peaks`' arithmetic, tested above)."""
    h200 = GPUS["H200"]
    monkeypatch.setattr(cuda.core, "Device", h200.device)
    roof, least_work = LEAST_WORK[kernel.kind]
    rate = {"dram": h200.datasheet_dram, "fp32": h200.datasheet_fp32}[roof] * share
    seconds = least_work(*kernel.perf_shape) / rate
    timed_only = dataclasses.replace(kernel, check_shapes=())   # the checks' outcome is fixed: correct
    answer = child.check_and_time(TimedBench(kernel.kind, seconds), timed_only, "source", 1.0)
    assert answer["status"] == status, answer["message"]
    assert answer["timing"]["kernel"]["throughput"] == pytest.approx(rate)


class _Nvml:
    """pynvml on a machine of four GPUs, each with its own SM clock (1000 + 10 x its index MHz)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = "sm", "mem", "temp"

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return int(uuid.removeprefix("GPU-"))

    def nvmlDeviceGetClockInfo(self, handle, which):
        return 1000 + 10 * handle if which == "sm" else 3201

    nvmlDeviceGetMaxClockInfo = nvmlDeviceGetClockInfo

    def nvmlDeviceGetTemperature(self, handle, which):
        return 40


@pytest.mark.parametrize("visible, sm_mhz", [(None, 1000), ("2", 1020), ("3,1", 1030), ("GPU-1", 1010)])
def test_the_clocks_recorded_are_the_visible_gpus(monkeypatch, visible, sm_mhz):
    """NVML counts every GPU of the machine whatever CUDA_VISIBLE_DEVICES says: a worker bound to one GPU records
    that GPU's clocks."""
    monkeypatch.setitem(sys.modules, "pynvml", _Nvml())
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert timing.clocks()["sm_mhz"] == sm_mhz
