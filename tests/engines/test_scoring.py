import pytest

from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.scoring import counter_share, perf_share, score_kernel


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


@pytest.mark.parametrize("yours, share", [
    (289_000_000, 0.0),                 # no improvement: the reference's own count
    (300_000_000, 0.0),                 # worse than the reference
    (37_532_468, 0.68),                 # 7.7x fewer where the rule asks 20x: log 7.7 / log 20 = 0.6814
    (37_600_000, 0.68),                 # the linearize step handed in on the H200: 7.69x, 0.6807
    (14_450_000, 1.0),                  # at the bound, 0.05 x 289 M
    (14_450_001, 0.99),                 # one over it: short of all, in whole hundredths
    (20_000, 1.0), (0, 1.0),            # past it
])
def test_counter_share_is_a_log_scale_from_the_references_count_to_the_bound(yours, share):
    assert counter_share(yours, 289_000_000, 0.05) == share


def test_counter_share_grows_as_the_count_falls_and_a_rule_of_at_least_1_x_is_all_or_nothing():
    shares = [counter_share(count, 1_000_000, 0.6) for count in range(1_100_000, 500_000, -10_000)]
    assert shares == sorted(shares) and shares[0] == 0 and shares[-1] == 1 and 0 < shares[len(shares) // 2] < 1
    assert [counter_share(n, 100, 1.2) for n in (0, 100, 120, 121)] == [1, 1, 1, 0]
    assert (counter_share(0, 0, 0.05), counter_share(1, 0, 0.05)) == (1, 0)


def test_the_counter_share_multiplies_the_speed_points_only():
    padded = load_spec("transpose").kernel("padded")   # floor 0.5, target 0.8, 1 + 2 points
    mid = (padded.floor + padded.target) / 2
    assert score_kernel(padded, True, mid, counter=0.68).performance == pytest.approx(padded.points_perf * 0.5 * 0.68)
    assert score_kernel(padded, True, padded.target, counter=0.68).total == pytest.approx(1 + 2 * 0.68)
    assert score_kernel(padded, True, padded.target, counter=0).total == padded.points_correct
    assert score_kernel(padded, True, mid) == score_kernel(padded, True, mid, counter=1.0)
    assert score_kernel(padded, False, padded.target, counter=1.0).total == 0
