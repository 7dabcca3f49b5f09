"""The GEMM worklog graded on a real GPU: references, known-wrong submissions, autotuning, bank conflicts.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_gemm_gpu.py -x -q -s`` (``-s`` shows the
measurements). Each grading runs in its own child process, cuBLAS timed in the same child. The references'
table (GFLOP/s and % of cuBLAS at the spec's 4096^3) is written to ``benchmarks/results/gemm/gemm-<date>.json``
with its chart (``.png``, `workshop.records`), and copied to ``$OUT`` when that is set;
``python -m benchmarks.gemm_bench --merge`` adds other sizes to it.
"""
import json
import os
from pathlib import Path

import pytest

from graders import tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.structure import tune_launch
from graders.settings import ROOT
from workshop import ncu, records

pytestmark = pytest.mark.gpu

SPEC = load_spec("gemm")
BUDGET_S = float(os.environ.get("GEMM_TEST_BUDGET_S", "2.0"))   # per grading here (the spec's is for grading)
WRONG = tracks.get("gemm").wrong_solutions()
SLOW = ROOT / "tracks/gemm/solutions/wrong/slow_warptiling.cu"


def grade(kernel_id: str, source: str, **options) -> dict:
    result = grade_kernel("gemm", kernel_id, source, budget_s=options.pop("budget_s", BUDGET_S), **options)
    print("\n" + report(result))
    if result.status not in ("ok", "incorrect", "compile_error") and result.details.get("stderr"):
        print(result.details["stderr"][-2000:])
    return result.as_dict()


@pytest.fixture(scope="module")
def record() -> dict:
    rows = {}
    environment = None
    for kid, kernel in SPEC.kernels.items():
        result = grade(kid, kernel.reference.read_text())
        rows[kid] = records.gemm_row(result)
        environment = environment or result.get("environment")
    record = records.new_gemm_record(environment)
    record["sizes"][records.label(SPEC.kernel("warptiling").perf_shape)] = records.gemm_size_entry(rows)
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    path = records.write_gemm_record(record, out)
    print("\n" + records.gemm_table(record) + f"\nwrote {path}")
    record["_path"] = path
    return record


def rows(record: dict) -> dict:
    return next(iter(record["sizes"].values()))["kernels"]


def test_every_reference_is_correct(record):
    for kid, row in rows(record).items():
        assert row["status"] == "ok", f"{kid}: {row['message']} {row.get('stderr_tail', '')}"
        assert row["samples"] >= 3
        assert row["score"]["correctness"] == SPEC.kernel(kid).points_correct
    assert record["environment"]["gpu"] and record["environment"]["versions"]["torch"]
    assert record["_path"].exists() and record["_path"].with_suffix(".png").exists()


def test_cublas_is_measured(record):
    cublas = next(iter(record["sizes"].values()))["cublas_gflops"]
    print(f"\ncuBLAS SGEMM (TF32 off) at 4096^3: {cublas:.0f} GFLOP/s")
    assert cublas > 5_000    # an H200 gives about 50 800 (shared/device/README.md)


def test_the_worklog_climbs(record):
    ratio = {kid: r["ratio"] for kid, r in rows(record).items()}
    print("\n% of cuBLAS:", {k: round(100 * v, 1) for k, v in ratio.items()})
    ladder = ["naive", "coalesced", "smem", "blocktile1d", "blocktile2d", "vectorized"]
    for slower, faster in zip(ladder, ladder[1:]):
        assert ratio[slower] < ratio[faster], f"{slower} ({ratio[slower]:.3f}) >= {faster} ({ratio[faster]:.3f})"
    assert ratio["warptiling"] >= max(ratio.values()) * 0.97


def test_references_score_full_marks(record):
    short = {kid: (round(r["ratio"], 3), SPEC.kernel(kid).target) for kid, r in rows(record).items()
             if r["score"]["total"] < SPEC.kernel(kid).points}
    if short and SPEC.targets == "provisional":
        pytest.xfail(f"provisional targets above the references' measured ratios: {short} "
                     "(set floor/target from this run's JSON, then targets = 'measured')")
    assert not short


def test_autotuned_runs_another_configuration():
    config = {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8}
    result = grade("autotuned", SPEC.kernel("autotuned").reference.read_text(), **tune_launch(config))
    assert result["status"] == "ok", result["message"]
    assert result["geometry"]["block"] == [16, 16] and result["geometry"]["tile"] == [128, 64]


def test_slow_kernel_scores_lower_than_the_reference(record):
    result = grade("warptiling", SLOW.read_text())
    assert not tracks.unmet_expectation(SLOW, result["status"], result["score"]["total"]), result["message"]
    reference = rows(record)["warptiling"]
    assert result["timing"]["ratio"] < reference["ratio"]
    assert result["score"]["total"] <= reference["score"]["total"]


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_submission_is_caught(path):
    if path == SLOW:
        pytest.skip("graded in test_slow_kernel_scores_lower_than_the_reference")
    result = grade(tracks.graded_kernel(path), path.read_text())
    assert not tracks.unmet_expectation(path, result["status"], result["score"]["total"]), result["message"]
    if path.stem == "compile_error":
        assert "line 10" in result["message"]


def test_bank_conflict_fixes_show_in_ncu(record):
    conflicts = ncu.gemm_bank_conflicts()
    path = record["_path"]
    saved = json.loads(path.read_text())
    saved["ncu"] = conflicts
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    records.write_gemm_record(saved, out, path.name)
    if "skipped" in conflicts:
        pytest.skip(f"ncu: {conflicts['skipped']} {conflicts.get('errors', '')}")
    counts = conflicts["conflicts"]
    print("\nshared-memory bank conflicts (loads / stores):", counts)
    assert counts["linearize"]["ld"] < counts["vectorized"]["ld"]
    assert counts["swizzle"]["ld"] < counts["vectorized"]["ld"]
    assert counts["linearize"]["st"] < counts["vectorized"]["st"]
    assert counts["swizzle"]["st"] < counts["vectorized"]["st"]
