"""The attention track graded on a real GPU: every reference and every known-wrong solution through
`grade_kernel` (correctness, timing against the step's baseline in the same child, compute-sanitizer).

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_attention_gpu.py -q -s`` (``-s`` prints each
step's time, TFLOP/s or GB/s and ratio). The references' table is written to
``benchmarks/results/attention/attention-gpu-<date-time>.json`` (and ``$OUT``). The timing budget per grading is
``ATTENTION_TEST_BUDGET_S`` (default 2 s), not the spec's.
"""
from __future__ import annotations

import os

import pytest

from graders import tracks
from graders.cuda_engine.grade import CORRECT, grade_kernel, report
from graders.cuda_engine.spec import load_spec
from workshop.records import kernel_row, write_references_record

pytestmark = pytest.mark.gpu

SPEC = load_spec("attention")
TRACK = tracks.get("attention")
BUDGET_S = float(os.environ.get("ATTENTION_TEST_BUDGET_S", "2.0"))


def grade(kernel_id: str, source: str) -> dict:
    result = grade_kernel("attention", kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result))
    if result.status not in CORRECT and result.details.get("stderr"):
        print(result.details["stderr"][-2000:])
    return result.as_dict()


@pytest.fixture(scope="module")
def references() -> dict[str, dict]:
    results = {kid: grade(kid, kernel.reference.read_text()) for kid, kernel in SPEC.kernels.items()}
    rows = {kid: kernel_row(result) for kid, result in results.items()}
    for causal, unmasked in (("flash_causal", "flash_forward"), ("flash_tc_causal", "flash_tc")):
        if "kernel_ms" in rows[unmasked] and "kernel_ms" in rows[causal]:
            rows[causal]["time_over_unmasked"] = rows[causal]["kernel_ms"] / rows[unmasked]["kernel_ms"]
            print(f"{causal} / {unmasked} time: {rows[causal]['time_over_unmasked']:.3f} (the issue's goal for the "
                  "tensor-core pair: at most 0.6)")
    write_references_record("attention", "the attention track's references graded on the GPU (grade_kernel)", results,
                            rows, BUDGET_S, prefix="attention-gpu")
    return rows


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_and_gets_full_marks(references, kernel_id):
    r = references[kernel_id]
    assert r["status"] == "ok", r["message"]
    assert r["points"] == r["max_points"], r   # targets are provisional: set under what a reference reaches


@pytest.mark.parametrize("kernel_id", ["flash_tc", "flash_tc_causal"])
def test_tensor_core_references_run_on_the_tensor_cores_and_are_correct(references, kernel_id):
    """The FlashAttention-2 steps' references: correct at every check shape and while timed, their SASS holds
    tensor-core instructions (the kind's requirement, checked in the grading child); the ratio to SDPA's
    flash backend is printed against the issue's goal of 0.7 (not asserted: targets are provisional)."""
    r = references[kernel_id]
    assert r["status"] == "ok", r["message"]
    assert r["sass"] == {"requirements": ["tensor_cores", "no_global_scratch"], "unmet": []}, r["sass"]
    if "ratio" in r:
        print(f"{kernel_id}: {r['kernel_rate']:.1f} TFLOP/s, {r['ratio']:.3f} of SDPA's flash backend (goal for "
              f"the unmasked one: 0.7)")


@pytest.mark.parametrize("kernel_id", ["flash_causal", "flash_tc_causal"])
def test_causal_references_pass_their_counter_rule_at_about_half_the_unmasked_work(references, kernel_id):
    """ncu's count of the causal reference's work at the perf shape, against the unmasked reference's: at most
    0.6 (the rule); skipping the masked tiles makes it about 0.5 (0.504 and 0.508 of the tiles)."""
    counter = references[kernel_id]["counter"]
    assert counter and not counter["failure"], counter
    share = counter["yours"] / counter["reference"]
    print(f"{kernel_id}: {counter['metric']} {counter['yours']:,} / {counter['reference']:,} = {share:.3f}")
    assert 0.4 < share <= 0.6


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.name)
def test_known_wrong_solution_gets_its_expected_status_and_points(path):
    kernel_id = tracks.graded_kernel(path)
    result = grade(kernel_id, path.read_text())
    assert not tracks.unmet_expectation(path, result["status"], result["points"]), result["message"]
