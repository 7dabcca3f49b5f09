import pytest

from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.scoring import perf_share, score_kernel


@pytest.mark.parametrize("ratio, share", [(0.0, 0.0), (0.4, 0.0), (0.5, 0.0), (0.65, 0.5), (0.8, 1.0),
                                          (1.3, 1.0)])
def test_perf_share_is_zero_below_floor_linear_then_full(ratio, share):
    assert perf_share(ratio, floor=0.5, target=0.8) == pytest.approx(share)


def test_perf_share_is_monotonic():
    shares = [perf_share(r / 100, 0.3, 0.7) for r in range(0, 120)]
    assert shares == sorted(shares)


def test_correctness_gates_everything():
    padded = load_spec("transpose").kernel("padded")
    assert score_kernel(padded, correct=False, ratio=5.0).total == 0
    assert score_kernel(padded, correct=True, ratio=None).total == 0


def test_correct_kernel_scores_correctness_plus_share_of_perf():
    padded = load_spec("transpose").kernel("padded")   # floor 0.5, target 0.8, 1 + 2 points
    mid = score_kernel(padded, correct=True, ratio=(padded.floor + padded.target) / 2)
    assert mid.correctness == padded.points_correct
    assert mid.performance == pytest.approx(padded.points_perf / 2)
    assert mid.max == padded.points
    slow = score_kernel(padded, correct=True, ratio=padded.floor / 2)
    assert slow.total == padded.points_correct
    assert score_kernel(padded, correct=True, ratio=padded.target).total == padded.points
