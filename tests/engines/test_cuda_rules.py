"""Every grading rule of the CUDA C++ engine at its edge, generated from the rule itself.

Tolerances: each problem kind's check (`graders.cuda_engine.child.verdict`, what the child applies) passes
the reference, passes a result just inside the rule and fails one just outside it, with the message the
student reads. The rule is restated here (``EXACT``, ``SGEMM_ELEMENT_RTOL``, ``SGEMM_FROBENIUS_RTOL``), not read
from the grader, so a tolerance loosened or tightened in the grader fails a test. Scoring: every CUDA
kernel's points just below, at and just above its floor and target, between them, and when it is wrong.
"""
import math
import re

import pytest
import torch

from graders import tracks
from graders.cuda_engine.child import verdict
from graders.cuda_engine.grade import SPEED_NOT_CREDITED, result_from_child
from graders.cuda_engine.problems import kinds, problem
from graders.cuda_engine.scoring import perf_share, score_kernel
from graders.cuda_engine.spec import load_spec
from graders.result import Status
from graders.sandbox.run import ChildResult

EXACT = {"copy": (33, 65), "transpose": (33, 65), "vecadd": (1000,), "copy_rows": (33, 65)}   # bit-identical kinds
# row_sum (tracks/debugging/problem.py): its rule is tested in tests/tracks/test_debugging.py
# sgemm (tracks/gemm/problem.py, spec.toml): every element within SGEMM_ELEMENT_RTOL * (|A| @ |B|) of the
# float64 product, and the relative Frobenius error within SGEMM_FROBENIUS_RTOL.
SGEMM_ELEMENT_RTOL = 1e-3
SGEMM_FROBENIUS_RTOL = 1e-4
SGEMM_SHAPE = (256, 256, 32)   # large enough that one element at its bound leaves the Frobenius error far below its own
# row_softmax (tracks/attention/problem.py): every probability within SOFTMAX_RTOL x the float64 one, plus
# SOFTMAX_ATOL (below fp32's normal range). The attention kinds: in every (batch, head), the largest error
# against the fp32 reference at most ATTENTION_FACTOR x PyTorch's bf16 error there + ATTENTION_FLOOR.
SOFTMAX_RTOL = 2e-5
SOFTMAX_ATOL = 1e-37
ATTENTION_FACTOR = 2.0
ATTENTION_FLOOR = 1e-5
ATTENTION_KINDS = {"attention_forward": (1, 2, 33, 40, 64), "attention_forward_causal": (1, 2, 40, 33, 64),
                   "attention_forward_tc": (1, 2, 33, 40, 128), "attention_forward_causal_tc": (1, 2, 40, 33, 128),
                   "attention_decode": (2, 2, 97, 128)}


def test_every_kind_has_its_rule_here():
    # the tensor-core kinds' rules (tracks/tensorcores/problem.py) are tested in tests/tracks/test_tensorcores.py,
    # nvfp4_gemv's (tracks/nvfp4/problem.py) in tests/tracks/test_nvfp4.py, the serving kinds' in
    # tests/tracks/test_serving.py, f16gemm_kmajor's in tests/tracks/test_cutlass.py
    assert sorted(kinds()) == sorted([*EXACT, "sgemm", "bf16gemm", "bf16gemm_kmajor", "f16gemm", "f16gemm_kmajor",
                                      "tf32gemm", "fp8gemm", "row_softmax", *ATTENTION_KINDS, "row_sum", "nvfp4_gemv",
                                      "rmsnorm_residual", "swiglu", "paged_decode", "w4a16_gemv", "fp8_scaled_gemm"])


# --- bit-identical kinds ------------------------------------------------------------------------------

def exact_case(kind: str):
    inputs = problem(kind).make_inputs(EXACT[kind], torch.Generator().manual_seed(0))
    return problem(kind), problem(kind).reference(inputs)


@pytest.mark.parametrize("kind", list(EXACT))
def test_exact_kind_passes_its_reference(kind):
    rule, expected = exact_case(kind)
    assert verdict(rule, expected.clone(), expected) == ""


@pytest.mark.parametrize("kind", list(EXACT))
def test_exact_kind_fails_one_ulp(kind):
    """One ulp of the smallest value: any absolute or relative tolerance lets it through."""
    rule, expected = exact_case(kind)
    index = int(expected.abs().flatten().argmin())
    out = expected.clone()
    out.view(-1)[index] = torch.nextafter(out.view(-1)[index], torch.tensor(math.inf))
    where = "".join(f"[{int(i)}]" for i in torch.unravel_index(torch.tensor(index), out.shape))
    message = verdict(rule, out, expected)
    assert message.startswith(f"1 of {out.numel()} values wrong; first at out{where}: expected "), message
    shown = re.fullmatch(r".*expected (\S+), got (\S+)", message)
    assert shown[1] != shown[2], "the message must show the two values differently"


@pytest.mark.parametrize("kind", list(EXACT))
def test_exact_kind_fails_a_nan(kind):
    rule, expected = exact_case(kind)
    out = expected.clone()
    out.view(-1)[-1] = float("nan")
    message = verdict(rule, out, expected)
    assert message.startswith(f"1 of {out.numel()} values wrong; ") and message.endswith(
        ", got nan (NaN: your kernel never wrote it)")


# --- sgemm --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sgemm():
    """The rule, the checker's expected object, the float64 product and each element's bound by the rule."""
    a, b = problem("sgemm").make_inputs(SGEMM_SHAPE, torch.Generator().manual_seed(0))
    expected = problem("sgemm").reference([a, b])
    bound = SGEMM_ELEMENT_RTOL * (a.double().abs() @ b.double().abs())
    return problem("sgemm"), expected, expected.c, bound


def frobenius(out, c) -> float:
    return float(torch.linalg.vector_norm(out.double() - c) / torch.linalg.vector_norm(c))


def test_sgemm_passes_the_rounded_product_and_states_the_bound(sgemm):
    rule, expected, c, bound = sgemm
    assert verdict(rule, c.float(), expected) == ""
    torch.testing.assert_close(expected.bound, bound, rtol=1e-12, atol=1e-29)


@pytest.mark.parametrize("scale", [0.9, 1.1])
@pytest.mark.parametrize("sign", [1, -1])
def test_sgemm_one_element_at_its_bound(sgemm, scale, sign):
    rule, expected, c, bound = sgemm
    out = c.float()
    out[17, 3] = float(c[17, 3] + sign * scale * bound[17, 3])
    assert frobenius(out, c) < SGEMM_FROBENIUS_RTOL / 4      # the element rule alone decides
    message = verdict(rule, out, expected)
    if scale < 1:
        assert message == ""
    else:
        assert message.startswith(f"1 of {out.numel()} values outside the fp32 tolerance; first at C[17][3]: "
                                  f"expected {float(c[17, 3]):.6g}, got {float(out[17, 3]):.6g}; "
                                  "relative Frobenius error "), message


@pytest.mark.parametrize("scale", [0.9, 1.1])
def test_sgemm_spread_error_at_the_frobenius_bound(sgemm, scale):
    """Every element off by the same relative amount: far inside its own bound, the Frobenius rule decides."""
    rule, expected, c, bound = sgemm
    out = (c * (1 + scale * SGEMM_FROBENIUS_RTOL)).float()
    frob = frobenius(out, c)
    assert frob == pytest.approx(scale * SGEMM_FROBENIUS_RTOL, rel=1e-3)
    assert ((out.double() - c).abs() <= bound / 4).all()
    message = verdict(rule, out, expected)
    if scale < 1:
        assert message == ""
    else:
        assert message == f"relative Frobenius error {frob:.3g} (allowed {SGEMM_FROBENIUS_RTOL:g})"


def test_sgemm_fails_a_nan(sgemm):
    rule, expected, c, bound = sgemm
    out = c.float()
    out[200, 100] = float("nan")
    assert verdict(rule, out, expected).startswith(
        f"1 of {out.numel()} values are NaN (never written, or computed from a read outside A or B, which are "
        "fenced with NaN), the first C[200][100]; ")


# --- row_softmax and attention ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale, ok", [(0.99, True), (1.01, False)])
def test_row_softmax_one_probability_at_its_bound(scale, ok):
    rule = problem("row_softmax")
    expected = rule.reference(rule.make_inputs((3, 50), torch.Generator().manual_seed(0)))
    out = expected.float()
    r, c = (int(i) for i in (expected == expected.max()).nonzero()[0])
    # the largest probability: 1% of its allowance (over 1e-7 of it) is more than an fp32 rounding step
    out[r, c] = float(expected[r, c] * (1 + scale * SOFTMAX_RTOL) + SOFTMAX_ATOL)
    message = verdict(rule, out, expected)
    assert (message == "") is ok, message
    if not ok:
        assert message.startswith(f"1 of 150 probabilities outside fp32 softmax's tolerance (relative "
                                  f"{SOFTMAX_RTOL:g}); first at out[{r}][{c}]")


@pytest.mark.parametrize("kind", list(ATTENTION_KINDS))
@pytest.mark.parametrize("scale, ok", [(0.99, True), (1.01, False)])
def test_attention_largest_error_of_a_head_at_its_bound(kind, scale, ok):
    rule = problem(kind)
    expected = rule.reference(rule.make_inputs(ATTENTION_KINDS[kind], torch.Generator().manual_seed(0)))
    for head in range(expected.o.shape[1]):
        out = expected.o.clone()
        allowed = ATTENTION_FACTOR * float(expected.torch_error[0, head]) + ATTENTION_FLOOR
        out[0, head, 0, 5] += scale * allowed
        message = verdict(rule, out, expected)
        assert (message == "") is ok, (head, message)
        if not ok:
            assert message.startswith(f"1 of {expected.torch_error.numel()} (batch, head) pairs too far from the "
                                      f"fp32 reference; first batch 0, head {head}: "), message


@pytest.mark.parametrize("kind", ["row_softmax", *ATTENTION_KINDS])
def test_softmax_and_attention_fail_a_nan(kind):
    rule = problem(kind)
    shape = ATTENTION_KINDS.get(kind, (3, 50))
    expected = rule.reference(rule.make_inputs(shape, torch.Generator().manual_seed(0)))
    out = (expected.o if kind in ATTENTION_KINDS else expected.float()).clone()
    out.view(-1)[-1] = float("nan")
    assert "NaN" in verdict(rule, out, expected) and "never written" in verdict(rule, out, expected)


# --- scoring ------------------------------------------------------------------------------------------

KERNELS = [k for track in tracks.all_tracks() if track.engine == "cuda"
           for k in load_spec(track.folder).kernels.values()]
NEAR = 1e-9   # "just below" and "just above" a ratio, relative


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_points_at_the_edges_of_the_curve(kernel):
    floor, target = kernel.floor, kernel.target

    def speed_points(ratio):
        score = score_kernel(kernel, True, ratio)
        assert score.correctness == kernel.points_correct and score.max == kernel.points
        return score.performance
    assert speed_points(floor * (1 - NEAR)) == 0
    assert speed_points(floor) == 0
    assert 0 < speed_points(floor * (1 + NEAR)) < kernel.points_perf * 1e-6
    assert speed_points(floor + (target - floor) / 4) == pytest.approx(kernel.points_perf / 4)
    assert speed_points((floor + target) / 2) == pytest.approx(kernel.points_perf / 2)
    assert kernel.points_perf * (1 - 1e-6) < speed_points(target * (1 - NEAR)) < kernel.points_perf
    assert speed_points(target) == kernel.points_perf
    assert speed_points(target * 3) == kernel.points_perf


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_a_wrong_kernel_scores_nothing_however_fast(kernel):
    assert score_kernel(kernel, False, kernel.target * 100).total == 0
    assert score_kernel(kernel, True, None).total == 0


def test_at_the_floor_nothing_even_where_the_curve_is_a_step():
    """``share = 0 if r <= floor`` comes first: at floor == target the step is taken only above it."""
    assert perf_share(0.5, 0.5, 0.5) == 0
    assert perf_share(0.5 * (1 + NEAR), 0.5, 0.5) == 1


@pytest.mark.parametrize("status", sorted(set(Status) - SPEED_NOT_CREDITED - {Status.OK}))
def test_only_an_ok_answer_is_scored_even_when_it_was_timed(status):
    """A kernel that fails after timing (or writes out of bounds while timed) has a ratio; it earns nothing."""
    spec = load_spec("transpose")
    kernel = spec.kernel("padded")
    answer = {"status": status, "message": "wrong", "timing": {"ratio": kernel.target * 100}}
    result = result_from_child(ChildResult("ok", answer=answer), spec, kernel, 10, seed=7)
    assert result.status == status and result.points == 0


@pytest.mark.parametrize("status", sorted(SPEED_NOT_CREDITED))
def test_a_correct_kernel_whose_speed_is_not_credited_earns_its_correctness_points_only(status):
    """Timed faster than the hardware allows, or a SASS requirement of its problem unmet."""
    assert SPEED_NOT_CREDITED == {Status.IMPLAUSIBLE, Status.UNMET}
    spec = load_spec("transpose")
    kernel = spec.kernel("padded")
    answer = {"status": status, "message": "too fast", "timing": {"ratio": kernel.target * 100}}
    result = result_from_child(ChildResult("ok", answer=answer), spec, kernel, 10, seed=7)
    assert result.points == kernel.points_correct and result.details["score"]["performance"] == 0
