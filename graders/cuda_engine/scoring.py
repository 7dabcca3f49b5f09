"""Points for one kernel.

Correctness gates everything: a kernel that is wrong, writes out of bounds, crashes, hangs or does not
compile scores 0, speed included. A correct kernel earns ``points_correct`` plus a share of
``points_perf`` set by its speed ratio r = baseline time / kernel time (both measured in the same run on
the same GPU, so r is the fraction of the baseline's throughput the kernel reaches):

    share = 0                                  if r <= floor
          = (r - floor) / (target - floor)     if floor < r < target   (linear)
          = 1                                  if r >= target

A step whose lesson is a hardware counter (`graders.cuda_engine.spec.CounterRule`) multiplies that by the
counter's share c (`counter_share`): performance = points_perf x share x c. Speed alone cannot show such a
step's lesson (the linearized GEMM runs within 4% of the step before it), so the speed points are credited in
proportion to how much of the lesson the count shows: all of them at the rule's bound, none at the reference's
count, where the step before it stands. Multiplying keeps the speed points' maximum, and full marks need both
the speed and the count; the correctness points never depend on the count.
"""
from __future__ import annotations

import math
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


def counter_share(yours: int, reference: int, at_most: float) -> float:
    """The fraction of the speed points a counter rule leaves a count of ``yours`` against the reference's
    ``reference``, on a log scale of how many times fewer it is (x = reference / yours, the bound's b = 1 / at_most):

        c = 0                              if x <= 1   (no fewer than the reference)
          = floor(100 log x / log b) / 100  if 1 < x < b
          = 1                              if yours <= at_most x reference

    The log scale credits each halving of the count alike (conflicts and work fall by factors: 7.7x fewer of
    the 20x a rule asks earns log 7.7 / log 20 = 0.68). The share is cut to whole hundredths, so the fraction the
    feedback shows is the one applied, and a count within ncu's run-to-run noise of the reference's earns nothing
    (two gradings of one reference on the H200 differed by 0.01%; a hundredth of the scale is 3% of the count at
    b = 20, 0.5% at b = 1.67)."""
    if yours <= at_most * reference:
        return 1.0
    if yours >= reference:
        return 0.0
    return math.floor(100 * math.log(reference / yours) / math.log(1 / at_most)) / 100


def score_kernel(kernel: KernelSpec, correct: bool, ratio: float | None, counter: float = 1.0) -> Score:
    """The kernel's points; ``counter`` is its counter rule's `counter_share` (1 for a kernel without one)."""
    if not correct or ratio is None:
        return Score(0.0, 0.0, kernel.points)
    return Score(kernel.points_correct,
                 kernel.points_perf * perf_share(ratio, kernel.floor, kernel.target) * counter, kernel.points)
