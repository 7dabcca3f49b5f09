"""The GEMM benchmark's verdict on the worklog's warp-tiling goal (a speed goal is a benchmark's, not a test's)."""
from __future__ import annotations

from workshop.records import WARPTILING_GOAL, warptiling_goal_line


def test_goal_verdict_at_and_around_the_goal():
    line = warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": WARPTILING_GOAL}})
    assert line.endswith(": met") and "93.7% of cuBLAS" in line
    below = warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": WARPTILING_GOAL - 0.001}})
    assert below.endswith(": not met")
    assert warptiling_goal_line("4096x4096x4096", {"naive": {"ratio": 0.1}}) is None
