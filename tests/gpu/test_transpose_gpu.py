"""The transpose ladder graded on a real GPU: references, known-wrong submissions, re-grading spread.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_transpose_gpu.py -x -q -s``
(``-s`` shows the measurements). Each grading runs in its own child process.
"""
import pytest

from graders import tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec
from graders.settings import ROOT

pytestmark = pytest.mark.gpu

SPEC = load_spec("transpose")
BUDGET_S = 3.0                 # timing budget per grading here (the spec's is for real grading)
HANG_TIMEOUT_S = 30.0
REGRADES = 5
WRONG = tracks.get("transpose").wrong_solutions()
SLOW = ROOT / "tracks/transpose/solutions/wrong/slow_tiled.cu"


def grade(kernel_id: str, source: str, **options) -> dict:
    result = grade_kernel("transpose", kernel_id, source, budget_s=options.pop("budget_s", BUDGET_S), **options)
    print("\n" + report(result))
    return result.as_dict()


@pytest.fixture(scope="module")
def references() -> dict[str, dict]:
    return {kid: grade(kid, k.reference.read_text()) for kid, k in SPEC.kernels.items()}


def test_every_reference_is_correct(references):
    for kid, result in references.items():
        assert result["status"] == "ok", f"{kid}: {result['message']} {result.get('stderr', '')}"
        assert result["compile"]["resources"][SPEC.kernel(kid).function]["registers"], kid
        assert all(check["ok"] for check in result["checks"])
        assert any(check.get("after_timing") for check in result["checks"])
        assert result["timing"]["kernel"]["samples"] >= 10
        assert result["score"]["correctness"] == SPEC.kernel(kid).points_correct
        env = result["environment"]
        assert env["gpu"] and env["versions"]["torch"] and env["l2_bytes"] > 0


def test_copy_bandwidth_is_measured(references):
    assert references["copy"]["status"] == "ok", references["copy"]["message"]
    timing = references["copy"]["timing"]
    copy_gbps = timing["baseline"]["throughput"] / 1e9
    print(f"\nD2D copy {copy_gbps:.0f} GB/s; copy kernel {timing['kernel']['throughput'] / 1e9:.0f} GB/s "
          f"(ratio {timing['ratio']:.3f}); rse {timing['baseline']['rse']:.4f}")
    assert copy_gbps > 500       # an H200 gives about 4200
    assert timing["ratio"] > 0.5


def test_the_ladder_climbs(references):
    failed = {kid: r["message"] for kid, r in references.items() if r["status"] != "ok"}
    assert not failed, failed
    ratio = {kid: r["timing"]["ratio"] for kid, r in references.items()}
    print("\nratios:", {k: round(v, 3) for k, v in ratio.items()})
    assert ratio["naive"] < ratio["tiled"] < ratio["padded"]
    assert ratio["best"] >= 0.97 * ratio["padded"], "the best reference should be at least as fast as padded"
    assert ratio["padded"] < ratio["copy"] * 1.1


def test_regrading_the_same_submission_gives_the_same_score():
    kernel = SPEC.kernel("padded")
    results = [grade("padded", kernel.reference.read_text()) for _ in range(REGRADES)]
    failed = [f"#{i + 1}: {r['status']}: {r['message']} {r.get('stderr', '')}".strip()
              for i, r in enumerate(results) if r["status"] != "ok"]
    assert not failed, "re-grading the padded reference failed:\n" + "\n".join(failed)
    ratios = [r["timing"]["ratio"] for r in results]
    perf = [r["score"]["performance"] for r in results]
    spread = (max(perf) - min(perf)) / kernel.points_perf * 100   # in points of 100
    on_slope = (max(ratios) - min(ratios)) / (kernel.target - kernel.floor) * 100   # if no ratio were clamped
    print(f"\nre-grading padded {REGRADES}x: ratios {[round(x, 4) for x in ratios]}, perf points {perf}, "
          f"spread {spread:.2f} points of 100 ({on_slope:.2f} if on the curve's slope; ratio spread "
          f"{(max(ratios) - min(ratios)) / min(ratios):.2%})")
    assert all(r["status"] == "ok" for r in results)
    assert spread <= 1.0


def test_student_geometry_is_used():
    best = SPEC.kernel("best")
    result = grade("best", best.reference.read_text(), block=(32, 16), tile=(64, 64))
    assert result["status"] == "ok", result["message"]
    assert result["geometry"] == {"block": [32, 16], "tile": [64, 64]}


def test_slow_kernel_scores_lower_than_the_reference(references):
    result = grade("tiled", SLOW.read_text())
    assert not tracks.unmet_expectation(SLOW, result["status"], result["score"]["total"]), result["message"]
    reference = references["tiled"]
    assert result["timing"]["ratio"] < reference["timing"]["ratio"]
    assert result["score"]["total"] < reference["score"]["total"]


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_submission_is_caught(path):
    if path == SLOW:
        pytest.skip("graded in test_slow_kernel_scores_lower_than_the_reference")
    statuses = tracks.expected_statuses(path)
    timeout = HANG_TIMEOUT_S if "timeout" in statuses else None
    result = grade(tracks.graded_kernel(path), path.read_text(), timeout_s=timeout)
    assert not tracks.unmet_expectation(path, result["status"], result["score"]["total"]), result["message"]
    if "timeout" in statuses:
        assert result["seconds"] < HANG_TIMEOUT_S + 10
    if path.stem == "lazy_after_warmup":
        assert result["message"].startswith("timed launch ") and "gave wrong results" in result["message"]
    if path.stem == "compile_error":
        assert "line 9" in result["message"]
    if path.stem == "oob_writer":
        assert f"flat index {1024 * 1024 + 7}" in result["message"]
