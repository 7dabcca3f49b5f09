"""Timing GPU work, and the record of what it was timed on.

`CudaTimer` times each *subject* (the student's kernel, the baseline) with CUDA events on one stream:
before every sample it writes a buffer twice the size of L2 (so no sample starts with its data cached),
launches the subject ``reps`` times between two events (after a warm-up of at least ``warmup_s`` running
every subject in turn, so the GPU leaves its idle clocks before the first sample: an idle H200 sits at
405 MHz SM clock, and the first kernel graded after idling measured a low D2D copy baseline) (``reps`` chosen in warm-up so one sample lasts at
least ``min_sample_s``: short kernels are not dominated by launch gaps and event resolution) rotating
through several input sets, and then synchronizes the whole device, so nothing a sample started is still
running when the next one begins. `run_until_stable` interleaves the subjects round by round (clock drift
hits both alike) until each one's relative standard error of the mean is below ``rse_target`` (1%), with at
least ``min_samples`` samples and ``min_time_s`` of sampling (many samples make the median steady from one
grading to the next), or until the time budget is spent; the median is what is reported.

`environment` records the GPU, its clocks (NVML, else nvidia-smi), driver, CUDA and library versions; it
goes with every result.
"""
from __future__ import annotations

import math
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
    reps: int            # launches per sample
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
                     max_samples: int = 5000, reps: dict[str, int] | None = None) -> dict[str, Stats]:
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
    return {s: Stats(statistics.median(t), statistics.fmean(t), rse(t), len(t), (reps or {}).get(s, 1),
                     stable(s)) for s, t in times.items()}


class CudaTimer:
    """Times subjects ``fn(set_index)`` that enqueue work on ``stream`` (a torch CUDA stream)."""

    def __init__(self, subjects: dict[str, Callable[[int], None]], n_sets: int, stream, *,
                 min_sample_s: float = 50e-6, warmup: int = 3, warmup_s: float = 0.3):
        import torch
        self.torch = torch
        self.subjects = subjects
        self.n_sets = n_sets
        self.stream = stream
        self.next_set = 0
        self.l2_bytes = l2_cache_bytes()
        self.flush_buffer = torch.empty(2 * self.l2_bytes // 4, dtype=torch.float32, device="cuda")
        self.flushes = 0
        with torch.cuda.stream(stream):
            self._warm_up(warmup_s)
            self.reps = {name: self._calibrate(name, warmup, min_sample_s) for name in subjects}

    def _warm_up(self, seconds: float) -> None:
        """Run every subject in turn until ``seconds`` have passed (at least once each)."""
        end = time.monotonic() + seconds
        while True:
            for name in self.subjects:
                for _ in range(8):
                    self.subjects[name](self._rotate())
            self.torch.cuda.synchronize()
            if time.monotonic() >= end:
                break

    def _calibrate(self, name: str, warmup: int, min_sample_s: float) -> int:
        for _ in range(warmup):
            self.subjects[name](self._rotate())
        self.torch.cuda.synchronize()
        one = min(self._sample(name, 1) for _ in range(3))
        return max(1, math.ceil(min_sample_s / max(one, 1e-9)))

    def _rotate(self) -> int:
        self.next_set = (self.next_set + 1) % self.n_sets
        return self.next_set

    def _sample(self, name: str, reps: int) -> float:
        torch = self.torch
        self.flushes += 1
        self.flush_buffer.fill_(float(self.flushes))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(self.stream)
        for _ in range(reps):
            self.subjects[name](self._rotate())
        end.record(self.stream)
        torch.cuda.synchronize()   # the whole device, not only this stream
        return start.elapsed_time(end) / 1e3 / reps

    def sample(self, name: str) -> float:
        with self.torch.cuda.stream(self.stream):
            return self._sample(name, self.reps[name])

    def measure(self, budget_s: float, rse_target: float = 0.01, min_samples: int = 20,
                min_time_s: float = 1.0) -> dict[str, Stats]:
        return run_until_stable(self.sample, list(self.subjects), budget_s=budget_s, rse_target=rse_target,
                                min_samples=min_samples, min_time_s=min(min_time_s, budget_s), reps=self.reps)


def l2_cache_bytes() -> int:
    import torch
    size = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
    return int(size) or 64 << 20


def clocks() -> dict:
    """Current and maximum SM and memory clocks in MHz, from NVML, else nvidia-smi; {} if neither."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
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
        out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,"
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
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
