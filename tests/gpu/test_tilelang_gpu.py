"""The TileLang track on a real GPU: each reference and each known-wrong solution graded by the engine
(`graders.tilelang_engine.grade.grade_tilelang`, one sandboxed child each, TileLang compiling there with nvcc for
the GPU's architecture), the check cell on the GPU, and the track autograded by nbgrader: the reference full
marks, the untouched stub 0, each known-wrong solution exactly its ``expect:`` points. Records go to
benchmarks/results/tilelang/. The ladder's rungs side by side (TileLang's GEMM among them):
tests/gpu/test_cutlass_gpu.py.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_tilelang_gpu.py -x -q -s`` (``-s`` shows the
reports). The references' record: ``benchmarks/results/tilelang/tilelang-<date-time>.json``.
``WORKSHOP_PERF_BUDGET_S`` (default here 1.5 s) is the timing budget per kernel.
"""
from __future__ import annotations

import os

import pytest

from graders import tracks
from graders.cuda_engine.grade import report
from graders.tilelang_engine import grade
from graders.tilelang_engine.kernel_source import kernel_from_cell
from graders.tilelang_engine.spec import load_tilelang_spec
from workshop.course import Autograding, Course, stderr_text
from workshop.records import kernel_row, write_gpu_record, write_references_record
from workshop.submissions import cuda_answers, wrong_groups

pytestmark = pytest.mark.gpu

TRACK = tracks.get("tilelang")
SPEC = load_tilelang_spec("tilelang")
BUDGET_S = 1.5


def _graded(kid: str, path) -> dict:
    result = grade.grade_tilelang("tilelang", kid, kernel_from_cell(path.read_text(), SPEC.kernel(kid).function),
                                  budget_s=BUDGET_S)
    print(f"\n{path.name}\n{report(result)}")
    return result.as_dict()


@pytest.fixture(scope="module")
def references() -> dict[str, dict]:
    """Each reference graded once, by kernel id; their rows written to a record (``kernels``, with the track's
    measuring code), which ``workshop targets tilelang RECORD`` reads."""
    results = {kid: _graded(kid, kernel.reference) for kid, kernel in SPEC.kernels.items()}
    write_references_record("tilelang", "the tilelang track's references graded at their perf shapes", results,
                            {kid: kernel_row(result) for kid, result in results.items()}, BUDGET_S, dists=("tilelang",))
    return results


@pytest.mark.parametrize("kid", list(SPEC.kernels))
def test_each_reference_is_correct_and_timed_on_the_gpu(references, kid):
    result = references[kid]
    assert result["status"] == "ok", f"{kid}: {result['message']} {result.get('stderr', '')}"
    assert result["compile"]["tilelang"] == "0.1.15" and result["compile"]["arch"].startswith("sm_")
    assert all(check["ok"] for check in result["checks"]) and any(c.get("after_timing") for c in result["checks"])
    assert result["timing"]["kernel"]["samples"] >= 10 and result["points"] > SPEC.kernel(kid).points_correct


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.stem)
def test_each_known_wrong_solution_gets_its_status_and_points_on_the_gpu(path):
    kid = tracks.graded_kernel(path)
    result = _graded(kid, path)
    assert tracks.unmet_expectation(path, result["status"], result["points"]) == "", result["message"]


def test_the_check_cell_runs_on_the_gpu(monkeypatch):
    monkeypatch.setattr(grade, "_checked", {})
    kernel = SPEC.kernel("softmax")
    mark, line = grade.checked("tilelang", "softmax", kernel_from_cell(kernel.reference.read_text(), kernel.function))
    assert mark == "✓" and "on the GPU" in line, line


@pytest.fixture(scope="module")
def grading(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "400")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or str(BUDGET_S))
        grading = Autograding(Course(tmp_path_factory.mktemp("tilelang-gpu-course"), "tilelang"))
        yield grading
        write_gpu_record("tilelang-track-nbgrader-gpu",
                         "nbgrader autograde of the tilelang track: reference, stub and its known-wrong solutions",
                         {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
                          "seconds_per_submission": grading.seconds, "scores": grading.scores},
                         dists=("nbgrader", "tilelang"), folder="tilelang")


def test_autograde_gives_the_reference_full_marks_the_stub_zero_and_each_wrong_its_expect(grading):
    full = {f"{kid}_score": k.points for kid, k in SPEC.kernels.items()}
    scores = grading.grade("reference", cuda_answers("tilelang"))
    outputs = grading.test_cell_outputs("reference")
    assert scores == full, {gid: "".join(o.get("text", "") for o in out) for gid, out in outputs.items()}
    assert not any(stderr_text(out) for out in outputs.values())
    assert grading.grade("stub", {}) == dict.fromkeys(full, 0.0)
    missed = {}
    for i, group in enumerate(wrong_groups("tilelang")):
        scores = grading.grade(f"wrong{i}", {kid: path.read_text() for kid, path in group.items()})
        for path in group.values():
            for grade_id, expected in tracks.expected_points(path).items():
                if not expected.matches(scores[grade_id]):
                    missed[f"{path.name}: {grade_id}"] = (scores[grade_id], str(expected))
    assert not missed, missed
