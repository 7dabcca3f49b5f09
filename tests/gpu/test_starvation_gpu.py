"""On a GPU worker, a CUDA kernel that never ends is its own timeout, not a busy worker's
(`graders.sandbox.starvation`): while it spins on the GPU, its grading child's host thread waits for it spinning
(CUDA's default scheduling: CPU time like a loop's) or asleep (blocking synchronisation), never ready to run and
waiting for a CPU. Prints what the child got from the machine.

Run on a GPU worker: ``python -m pytest -m gpu tests/gpu/test_starvation_gpu.py -s``.
"""
from __future__ import annotations

import pytest

from graders import tracks
from graders.cuda_engine.grade import grade_kernel
from graders.result import Status
from graders.sandbox.starvation import SHARE
from graders.settings import ROOT

pytestmark = pytest.mark.gpu

HANG = ROOT / "tracks/transpose/solutions/wrong/hang.cu"
LIMIT_S = 30.0


def test_a_kernel_that_never_ends_is_its_own_timeout_on_the_gpu():
    result = grade_kernel("transpose", tracks.graded_kernel(HANG), HANG.read_text(), budget_s=3.0, timeout_s=LIMIT_S,
                          sanitize=False, profile=False)
    usage = result.details["usage"]
    print(f"\nhang.cu at its {LIMIT_S:g} s limit: {usage}")
    assert result.status == Status.TIMEOUT
    spun = usage["cpu_s"] >= SHARE * LIMIT_S
    slept = usage["cpu_s"] + (usage["waited_s"] or 0.0) < usage["observed_s"] / 2
    assert spun or slept, usage
