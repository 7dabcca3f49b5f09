"""Points for one kernel.

Correctness gates everything: a kernel that is wrong, writes out of bounds, crashes, hangs or does not
compile scores 0, speed included. A correct kernel earns ``points_correct`` plus a share of
``points_perf`` set by its speed ratio r = baseline time / kernel time (both measured in the same run on
the same GPU, so r is the fraction of the baseline's throughput the kernel reaches):

    share = 0                                  if r <= floor
          = (r - floor) / (target - floor)     if floor < r < target   (linear)
          = 1                                  if r >= target
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from graders.cuda_engine.spec import KernelSpec


@dataclass(frozen=True)
class Score:
    correctness: float
    performance: float
    max: float

    @property
    def total(self) -> float:
        return self.correctness + self.performance

    def as_dict(self) -> dict[str, float]:
        return asdict(self) | {"total": self.total}


def perf_share(ratio: float, floor: float, target: float) -> float:
    """The fraction of the performance points earned at speed ratio ``ratio``."""
    if ratio <= floor:
        return 0.0
    if ratio >= target:
        return 1.0
    return (ratio - floor) / (target - floor)


def score_kernel(kernel: KernelSpec, correct: bool, ratio: float | None) -> Score:
    if not correct or ratio is None:
        return Score(0.0, 0.0, kernel.points)
    return Score(kernel.points_correct, kernel.points_perf * perf_share(ratio, kernel.floor, kernel.target),
                 kernel.points)
