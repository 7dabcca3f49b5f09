"""Timing GPU work, and the record of what it was timed on.

A `Timer` samples each *subject* (the student's kernel, the baseline) one launch at a time, in three steps:
``prepare`` (untimed: the child writes fresh random inputs and poisons the output), the launch (timed),
``verify`` (untimed, once the launch has finished: the child checks the output against the reference for
those inputs). So every timed launch is seen doing its work on inputs it has never seen: nothing a kernel
remembers from earlier launches (results by output pointer or by input values, outputs from warm-up, work
skipped on some launches) makes a timed launch cheaper than an honest one.

`CudaTimer` times a launch with CUDA events on one stream, after writing a buffer twice the size of L2 (no
launch starts with its data cached) and a GPU-side sleep of `SLEEP_CYCLES` (the GPU is still busy while the
host enqueues the launch, so the host's enqueue time is never timed, however long a baseline's library call
spends on the host), then synchronizes the whole device, so nothing a launch started is still running when the next one
begins. Before the first sample it runs every subject in turn for ``warmup_s``, so the
GPU leaves its idle clocks (an idle H200 sits at 405 MHz SM clock). `run_until_stable` interleaves the
subjects round by round (clock drift hits both alike) until each one's relative standard error of the mean
is below ``rse_target`` (1%), with at least ``min_samples`` samples and ``min_time_s`` of sampling, or
until the time budget is spent; the median is what is reported.

`peaks` gives the device's hardware ceilings (DRAM bandwidth, FP32 rate) from its clocks and widths: a
timed launch faster than its problem's ceiling allows did not do the work it claims. `environment` records
the GPU, its clocks (NVML, else nvidia-smi), driver, CUDA and library versions; it goes with every result.
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Callable


@dataclass(frozen=True)
class Stats:
    median_s: float
    mean_s: float
    rse: float           # standard error of the mean / mean
    samples: int
    converged: bool      # rse target met (False: the budget ran out first)

    def as_dict(self) -> dict:
        return asdict(self)


def rse(values: list[float]) -> float:
    if len(values) < 2:
        return math.inf
    mean = statistics.fmean(values)
    return statistics.stdev(values) / math.sqrt(len(values)) / mean if mean > 0 else math.inf


def run_until_stable(sample: Callable[[str], float], subjects: list[str], *, budget_s: float,
                     rse_target: float = 0.01, min_samples: int = 10, min_time_s: float = 0.0,
                     max_samples: int = 5000) -> dict[str, Stats]:
    """Call ``sample(subject)`` (seconds per launch) round-robin until every subject's mean is stable."""
    times: dict[str, list[float]] = {s: [] for s in subjects}
    start = time.monotonic()
    deadline = start + budget_s

    def stable(s: str) -> bool:
        return len(times[s]) >= min_samples and rse(times[s]) <= rse_target

    while True:
        for s in subjects:
            times[s].append(sample(s))
        n = len(times[subjects[0]])
        if n >= max_samples or (all(stable(s) for s in subjects) and time.monotonic() - start >= min_time_s):
            break
        if time.monotonic() >= deadline and n >= 3:
            break
    return {s: Stats(statistics.median(t), statistics.fmean(t), rse(t), len(t), stable(s))
            for s, t in times.items()}


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class Subject:
    """One thing to time: ``run`` enqueues the timed launch; ``prepare`` runs before it and ``verify`` after
    it has finished, both untimed (``verify`` raises to stop the timing)."""

    run: Callable[[], None]
    prepare: Callable[[], None] = _nothing
    verify: Callable[[], None] = _nothing


class Timer:
    """Samples subjects one launch at a time: prepare, timed launch (`timed`), verify. Subclasses time."""

    l2_bytes = 0   # the cache flushed before every launch

    def __init__(self, subjects: dict[str, Subject]):
        self.subjects = subjects

    def timed(self, name: str, run: Callable[[], None]) -> float:
        """Seconds ``run`` took (``name`` says which subject it is)."""
        raise NotImplementedError

    def sample(self, name: str) -> float:
        subject = self.subjects[name]
        subject.prepare()
        seconds = self.timed(name, subject.run)
        subject.verify()
        return seconds

    def measure(self, budget_s: float, rse_target: float = 0.01, min_samples: int = 20,
                min_time_s: float = 1.0, max_samples: int = 5000) -> dict[str, Stats]:
        return run_until_stable(self.sample, list(self.subjects), budget_s=budget_s, rse_target=rse_target,
                                min_samples=min_samples, min_time_s=min(min_time_s, budget_s),
                                max_samples=max_samples)


SLEEP_CYCLES = 1_000_000   # about 0.5 ms at 2 GHz: longer than the host takes to enqueue any subject's launch


class CudaTimer(Timer):
    """Times subjects whose work goes to ``stream`` (a torch CUDA stream) with CUDA events."""

    def __init__(self, subjects: dict[str, Subject], stream, *, warmup_s: float = 0.3):
        import torch
        super().__init__(subjects)
        self.torch = torch
        self.stream = stream
        self.l2_bytes = l2_cache_bytes()
        self.flush_buffer = torch.empty(2 * self.l2_bytes // 4, dtype=torch.float32, device="cuda")
        self.flushes = 0
        self._warm_up(warmup_s)

    def _warm_up(self, seconds: float) -> None:
        """Sample every subject in turn until ``seconds`` have passed (at least once each)."""
        end = time.monotonic() + seconds
        while True:
            for name in self.subjects:
                self.sample(name)
            if time.monotonic() >= end:
                break

    def timed(self, name: str, run: Callable[[], None]) -> float:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self.flushes += 1
            self.flush_buffer.fill_(float(self.flushes))
            torch.cuda._sleep(SLEEP_CYCLES)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(self.stream)
            run()
            end.record(self.stream)
        torch.cuda.synchronize()   # the whole device, not only this stream
        return start.elapsed_time(end) / 1e3


def l2_cache_bytes() -> int:
    import torch
    size = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
    return int(size) or 64 << 20


FP32_LANES_PER_SM = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}   # every other GPU: 128


def peaks() -> dict[str, float]:
    """The hardware ceilings of GPU 0: ``dram`` in bytes/s (memory clock x 2 transfers per clock x bus
    width, the datasheet's bandwidth) and ``fp32`` in FLOP/s (SMs x FP32 lanes per SM x 2 x peak SM clock).
    A ceiling the driver does not report is left out."""
    try:
        from cuda.core import Device
    except ImportError:  # cuda.core before 0.4
        from cuda.core.experimental import Device
    device = Device(0)
    props = device.properties
    found: dict[str, float] = {}
    with contextlib.suppress(Exception):
        found["dram"] = props.memory_clock_rate * 1e3 * 2 * props.global_memory_bus_width / 8
    with contextlib.suppress(Exception):
        lanes = FP32_LANES_PER_SM.get(tuple(device.compute_capability), 128)
        found["fp32"] = props.multiprocessor_count * lanes * 2 * props.clock_rate * 1e3
    return {k: v for k, v in found.items() if v > 0}


def visible_gpu() -> str:
    """The GPU this process's CUDA device 0 is, as NVML and nvidia-smi name it: the first entry of
    ``CUDA_VISIBLE_DEVICES`` (an index or a ``GPU-`` UUID), else ``"0"``. NVML ignores that variable and counts
    every GPU of the machine, so a worker bound to GPU 2 must ask for GPU 2's clocks, not GPU 0's."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return first if first.isdigit() or first.startswith("GPU-") else "0"


def clocks() -> dict:
    """Current and maximum SM and memory clocks in MHz of the GPU the process runs on (`visible_gpu`), from NVML,
    else nvidia-smi; {} if neither."""
    gpu = visible_gpu()
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            h = (pynvml.nvmlDeviceGetHandleByUUID(gpu) if gpu.startswith("GPU-")
                 else pynvml.nvmlDeviceGetHandleByIndex(int(gpu)))
            sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
            return {"source": "nvml", "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, sm),
                    "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, mem),
                    "sm_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, sm),
                    "mem_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, mem),
                    "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)}
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML: fall back to nvidia-smi
        pass
    try:
        out = subprocess.run(["nvidia-smi", "-i", gpu, "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,"
                              "clocks.max.mem,temperature.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        keys = ("sm_mhz", "mem_mhz", "sm_max_mhz", "mem_max_mhz", "temperature_c")
        return {"source": "nvidia-smi", **{k: _int_or_none(v) for k, v in zip(keys, out.split(","))}}
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return {}


def _int_or_none(text: str) -> int | None:
    try:
        return int(float(text.strip()))
    except ValueError:
        return None


def driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return out.splitlines()[0] if out else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("torch", "cuda-core", "cuda-bindings", "numpy", "nvidia-cuda-nvrtc", "nvidia-ml-py"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    try:
        from cuda.bindings import nvrtc
        _, major, minor = nvrtc.nvrtcVersion()
        found["nvrtc"] = f"{major}.{minor}"
    except Exception:  # NVRTC missing: report it as absent
        found["nvrtc"] = None
    return found


def environment() -> dict:
    """The GPU and software a measurement was made with."""
    import torch
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "gpu": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "l2_bytes": l2_cache_bytes(),
        "driver": driver_version(),
        "cuda_runtime": torch.version.cuda,
        "versions": versions(),
        "clocks": clocks(),
        "peaks": peaks(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
