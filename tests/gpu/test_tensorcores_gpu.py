"""The tensor-core worklog graded on a real GPU: every reference and every known-wrong solution.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_tensorcores_gpu.py -x -q -s`` (``-s`` shows
the table). Each grading runs in its own child process, cuBLAS (bf16 in, fp32 out) timed in the same child.
The references' TFLOP/s and ratio to cuBLAS at the spec's 4096^3 are printed and written to
``benchmarks/results/tensorcores-<date-time>.json`` (and ``$OUT``), a record ``workshop targets tensorcores``
reads (``sizes.4096x4096x4096.kernels.<id>.ratio``), with the worklog's chart (``.png``: TFLOP/s per step
against cuBLAS).
"""
import json
import os
import shutil

import pytest

from graders import tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.worklog_chart import plot
from workshop import records

pytestmark = pytest.mark.gpu

SPEC = load_spec("tensorcores")
BUDGET_S = float(os.environ.get("TENSORCORES_TEST_BUDGET_S", "2.0"))   # per grading here
WRONG = tracks.get("tensorcores").wrong_solutions()


def grade(kernel_id: str, source: str) -> dict:
    result = grade_kernel("tensorcores", kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result))
    return result.as_dict()


def table(rows: dict) -> str:
    lines = [f"{'step':<12}{'status':<10}{'TFLOP/s':>9}{'cuBLAS':>9}{'% cuBLAS':>10}{'points':>8}"]
    for kid, r in rows.items():
        if "ratio" in r:
            lines.append(f"{kid:<12}{r['status']:<10}{r['gflops'] / 1e3:>9.1f}{r['cublas_gflops'] / 1e3:>9.1f}"
                         f"{100 * r['ratio']:>9.1f}%{r['score']['total']:>8.2f}")
        else:
            lines.append(f"{kid:<12}{r['status']:<10}  {r['message'][:90]}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def rows() -> dict:
    found = {}
    environment = None
    for kid, kernel in SPEC.kernels.items():
        result = grade(kid, kernel.reference.read_text())
        found[kid] = records.gemm_row(result)
        environment = environment or result.get("environment")
    shape = records.label(SPEC.kernel("warptiling").perf_shape)
    fields = {"environment": environment, "targets_in_spec": SPEC.targets, "graded_shape": shape,
              "sizes": {shape: records.gemm_size_entry(found)}}
    path = records.write_gpu_record("tensorcores", "the tensor-core worklog's references graded at the spec's "
                                    "shape", fields)
    chart = plot(json.loads(path.read_text()), path.with_suffix(".png"), title="The tensor-core worklog",
                 panel="bf16 GEMM, fp32 accumulate", baseline="cuBLAS bf16 (fp32 out)")
    if os.environ.get("OUT"):
        shutil.copy(chart, os.environ["OUT"])
    print(f"\n{shape}, bf16 in, fp32 accumulate and out\n" + table(found) + f"\nwrote {path} and {chart.name}")
    return found


def test_every_reference_is_correct_with_full_correctness_points(rows):
    for kid, row in rows.items():
        assert row["status"] == "ok", f"{kid}: {row['message']} {row.get('stderr_tail', '')}"
        assert row["score"]["correctness"] == SPEC.kernel(kid).points_correct


def test_the_best_reference_against_the_issue_goal(rows):
    """Reported, not asserted beyond sanity: the issue's goal is 50% of cuBLAS bf16 at 4096^3."""
    best = max(rows, key=lambda kid: rows[kid].get("ratio", 0))
    print(f"\nbest: {best} at {100 * rows[best]['ratio']:.1f}% of cuBLAS (goal 50%)")
    assert rows[best]["ratio"] > rows["wmma"]["ratio"]


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_solution_gets_its_expected_status_and_points(path):
    kid = tracks.graded_kernel(path)
    result = grade(kid, path.read_text())
    timing = result.get("timing")
    if timing:
        print(f"{path.stem}: {timing['kernel']['throughput'] / 1e12:.1f} TFLOP/s, {100 * timing['ratio']:.1f}% of "
              f"cuBLAS")
    problem = tracks.unmet_expectation(path, result["status"], result["score"]["total"])
    assert not problem, f"{problem}: {result['message']}"
