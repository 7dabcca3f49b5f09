"""The Triton track on a real GPU: each reference and each known-wrong solution graded by the engine
(`graders.triton_engine.grade.grade_triton`, one sandboxed child each, Triton compiling there, the matmuls
autotuned over their configs), the references against the issue's goals (`GOALS`), the check cell on the GPU,
and the track autograded by nbgrader: the reference full marks, the untouched stub 0, each known-wrong solution
exactly its ``expect:`` points.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_triton_gpu.py -x -q -s`` (``-s`` shows the reports).
The references' record: ``benchmarks/results/triton/triton-<date-time>.json``. ``WORKSHOP_PERF_BUDGET_S`` (default
here 1.5 s) is the timing budget per kernel.
"""
from __future__ import annotations

import os

import pytest

from graders import tracks
from graders.cuda_engine.grade import report
from graders.triton_engine import grade
from graders.triton_engine.kernel_source import kernel_from_cell
from graders.triton_engine.spec import load_triton_spec
from workshop.course import Autograding, Course, stderr_text
from workshop.records import kernel_row, write_gpu_record, write_references_record
from workshop.submissions import cuda_answers, wrong_groups

pytestmark = pytest.mark.gpu

TRACK = tracks.get("triton")
SPEC = load_triton_spec("triton")
BUDGET_S = 1.5
# issue 30's goals for the references, as a ratio to the baseline's speed: a device copy's bandwidth for the
# memory-bound kernels, cuBLAS (torch.matmul) for the matmuls at 4096^3
GOALS = {"softmax": 0.85, "layernorm": 0.85, "matmul_fp16": 0.95, "matmul_bf16": 0.95}


def _graded(kid: str, path) -> dict:
    result = grade.grade_triton("triton", kid, kernel_from_cell(path.read_text(), SPEC.kernel(kid).function),
                                budget_s=BUDGET_S)
    print(f"\n{path.name}\n{report(result)}")
    return result.as_dict()


@pytest.fixture(scope="module")
def references() -> dict[str, dict]:
    """Each reference graded once, by kernel id; their rows written to a record (``kernels``, with the track's
    measuring code), which ``workshop targets triton RECORD`` reads."""
    results = {kid: _graded(kid, kernel.reference) for kid, kernel in SPEC.assignment.kernels.items()}
    write_references_record("triton", "the triton track's references graded at their perf shapes", results,
                            {kid: kernel_row(result) for kid, result in results.items()}, BUDGET_S, dists=("triton",))
    return results


@pytest.mark.parametrize("kid", list(SPEC.assignment.kernels))
def test_each_reference_is_correct_and_timed_on_the_gpu(references, kid):
    kernel = SPEC.kernel(kid)
    result = references[kid]
    assert result["status"] == "ok", f"{kid}: {result['message']} {result.get('stderr', '')}"
    assert not result["compile"]["interpreted"] and result["compile"]["triton"] == "3.6.0"
    assert all(check["ok"] for check in result["checks"]) and any(c.get("after_timing") for c in result["checks"])
    assert result["timing"]["kernel"]["samples"] >= 10 and result["points"] > kernel.points_correct
    if kid.startswith("matmul"):   # the configs read from the cell, one of them chosen by Triton's autotuner
        configs = result["compile"]["autotune"]["configs"]
        assert len(configs) == 8 and result["timing"]["autotuned"] in configs


@pytest.mark.parametrize("kid", list(GOALS))
def test_each_reference_meets_the_issues_goal(references, kid):
    timing = references[kid]["timing"]
    assert timing["ratio"] >= GOALS[kid], f"{kid}: {timing['ratio']:.3f} of {timing['baseline']['name']}"


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.stem)
def test_each_known_wrong_solution_gets_its_status_and_points_on_the_gpu(path):
    kid = tracks.graded_kernel(path)
    result = _graded(kid, path)
    assert tracks.unmet_expectation(path, result["status"], result["points"]) == "", result["message"]


@pytest.mark.parametrize("kid", ["softmax", "matmul_bf16"])   # the bf16 matmul, which the interpreter cannot check
def test_the_check_cell_runs_on_the_gpu(monkeypatch, kid):
    monkeypatch.setattr(grade, "_checked", {})
    kernel = SPEC.kernel(kid)
    mark, line = grade.checked("triton", kid, kernel_from_cell(kernel.reference.read_text(), kernel.function))
    assert mark == "✓" and "on the GPU" in line, line


@pytest.fixture(scope="module")
def grading(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "300")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or str(BUDGET_S))
        grading = Autograding(Course(tmp_path_factory.mktemp("triton-gpu-course"), "triton"))
        yield grading
        write_gpu_record("triton-track-nbgrader-gpu",
                         "nbgrader autograde of the triton track: reference, stub and its known-wrong solutions",
                         {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
                          "seconds_per_submission": grading.seconds, "scores": grading.scores},
                         dists=("nbgrader", "triton"), folder="triton")


def test_autograde_gives_the_reference_full_marks_the_stub_zero_and_each_wrong_its_expect(grading):
    full = {f"{kid}_score": k.points for kid, k in SPEC.assignment.kernels.items()}
    scores = grading.grade("reference", cuda_answers("triton"))
    outputs = grading.test_cell_outputs("reference")
    assert scores == full, {gid: "".join(o.get("text", "") for o in out) for gid, out in outputs.items()}
    assert not any(stderr_text(out) for out in outputs.values())
    assert grading.grade("stub", {}) == dict.fromkeys(full, 0.0)
    missed = {}
    for i, group in enumerate(wrong_groups("triton")):
        scores = grading.grade(f"wrong{i}", {kid: path.read_text() for kid, path in group.items()})
        for path in group.values():
            for grade_id, expected in tracks.expected_points(path).items():
                if not expected.matches(scores[grade_id]):
                    missed[f"{path.name}: {grade_id}"] = (scores[grade_id], str(expected))
    assert not missed, missed
