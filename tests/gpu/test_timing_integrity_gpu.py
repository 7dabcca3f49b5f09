"""Timing integrity on a real GPU: kernels that try to be fast while timed without doing the work.

Each cheat in ``tests/gpu/cheats/`` is honest whenever it is checked and tries to skip work once timed
(remembering results by pointer or by input values, replaying a kept result, working on every second launch
only, leaving the timed shape unwritten). None may earn speed points: the ones that skip work are caught on
a timed launch and score nothing; the one keyed on input values has to compute on every timed launch (fresh
inputs) and earns what its naive work earns. The honest references keep their ratios and stay under the
GPU's hardware ceiling. Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_timing_integrity_gpu.py -s``.
"""
from pathlib import Path

import pytest

from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec

pytestmark = pytest.mark.gpu

CHEATS = Path(__file__).parent / "cheats"
COMMON = (CHEATS / "transpose_common.cuh").read_text()
BUDGET_S = 1.5
CAUGHT = ["memo_pointer", "replay_first_timed", "lazy_every_other", "skips_the_timed_shape"]


def cheat(name: str) -> str:
    return (CHEATS / f"{name}.cu").read_text().replace('#include "transpose_common.cuh"', COMMON)


def grade(track: str, kernel_id: str, source: str) -> dict:
    result = grade_kernel(track, kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result))
    return result.as_dict()


@pytest.mark.parametrize("name", CAUGHT)
def test_a_kernel_that_skips_work_while_timed_scores_nothing(name):
    result = grade("transpose", "padded", cheat(name))
    assert result["status"] == "incorrect" and result["points"] == 0, result["message"]
    if name == "memo_pointer":   # a fresh output may get the last one's address: caught by a check, or when timed
        assert "values wrong" in result["message"]
    else:
        assert result["message"].startswith("timed launch ") and "gave wrong results" in result["message"]


def test_a_memo_keyed_on_input_values_computes_every_timed_launch_and_earns_no_speed():
    padded = load_spec("transpose").kernel("padded")
    result = grade("transpose", "padded", cheat("memo_pointer_and_values"))
    assert result["status"] == "ok", result["message"]
    assert result["timing"]["ratio"] < padded.floor and result["score"]["performance"] == 0
    assert result["timing"]["verified_launches"] == result["timing"]["kernel"]["samples"] >= 20


def test_an_sgemm_memo_keyed_on_input_values_earns_only_its_naive_speed():
    coalesced = load_spec("gemm").kernel("coalesced")
    result = grade("gemm", "coalesced", cheat("sgemm_memo_pointer_and_values"))
    assert result["status"] == "ok", result["message"]
    assert result["timing"]["ratio"] < coalesced.floor and result["score"]["performance"] == 0


@pytest.mark.parametrize("track, kernel_id", [("transpose", "padded"), ("transpose", "copy"),
                                              ("gemm", "warptiling"), ("vecadd", "add_float4")])
def test_an_honest_reference_is_verified_on_every_timed_launch_and_stays_under_the_ceiling(track, kernel_id):
    kernel = load_spec(track).kernel(kernel_id)
    result = grade(track, kernel_id, kernel.reference.read_text())
    assert result["status"] == "ok", result["message"]
    timing = result["timing"]
    print(f"ceiling {timing['ceiling']}; peaks {result['environment']['peaks']}")
    assert timing["ceiling"]["throughput"] > timing["kernel"]["throughput"]
    assert timing["verified_launches"] >= 20 and result["score"]["total"] == kernel.points
