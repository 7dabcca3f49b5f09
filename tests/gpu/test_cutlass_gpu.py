"""The CUTLASS track on a real GPU (an H100 or H200: sm_90a), and the abstraction ladder's record.

Run on a GPU worker, with CUTLASS's headers installed (``pip install --no-deps nvidia-cutlass==4.2.0.0``):
``python3 -m pytest -m gpu tests/gpu/test_cutlass_gpu.py -x -q -s`` (``-s`` shows the tables); on the lent GPU,
``bash benchmarks/gpu_trusted.sh grading cutlass``. The CPU's tests compile every kernel against CUTLASS's headers for
sm_90a and read its SASS (tests/tracks/test_cutlass.py); only these run them.

- every reference graded as a submission is (sandboxed child, cuBLAS in the kernel's format timed in the same child):
  correct at every check shape, before and after timing; the TFLOP/s, ratio to cuBLAS and points at 4096^3 written to
  ``benchmarks/results/cutlass/cutlass-<date-time>.json`` (and ``$OUT``) with its chart, the record
  ``workshop targets cutlass`` reads;
- every known-wrong solution ends in a status of its ``status:`` line with its ``expect:`` points;
- the ladder's rungs side by side: the fp16 GEMM at 4096^3 in CUDA C++ (the tensor-core worklog's step), Triton,
  CUTLASS and TileLang, each its track's reference graded by its engine (without the sanitizer and ncu); lines of
  code (as each grader counts them), TFLOP/s and share of cuBLAS in
  ``benchmarks/results/cutlass/ladder-gemm-<date-time>.json``, the record the feedback's ladder table reads
  (`graders.ladder`), and its chart.

nbgrader's grading of the reference, the stub (0) and the known-wrong solutions (their ``expect:`` points) is
tests/gpu/test_tracks_nbgrader_gpu.py's, over every CUDA track: ``-k cutlass``.
"""
import json
import os
import shutil

import pytest

from graders import ladder, tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.worklog_chart import plot
from workshop import records

pytestmark = pytest.mark.gpu

SPEC = load_spec("cutlass")
BUDGET_S = float(os.environ.get("CUTLASS_TEST_BUDGET_S", "2.0"))   # per grading here
WRONG = tracks.get("cutlass").wrong_solutions()


def grade(kid: str, source: str) -> dict:
    result = grade_kernel("cutlass", kid, source, budget_s=BUDGET_S)
    print(f"\n{report(result)}")
    return result.as_dict()


@pytest.fixture(scope="module")
def graded() -> dict[str, dict]:
    """Each reference graded once, by kernel id; the worklog record and its chart written."""
    results = {kid: grade(kid, kernel.reference.read_text()) for kid, kernel in SPEC.kernels.items()}
    found = {kid: records.gemm_row(r) for kid, r in results.items()}
    shape = records.label(SPEC.kernel("bf16").perf_shape)
    environment = next((r.get("environment") for r in results.values() if r.get("environment")), None)
    fields = {"environment": environment, "targets_in_spec": SPEC.targets, "graded_shape": shape,
              "sizes": {shape: records.gemm_size_entry(found)}}
    path = records.write_gpu_record("cutlass", "the CUTLASS track's references graded at the spec's shape", fields,
                                    track="cutlass")
    chart = plot(json.loads(path.read_text()), path.with_suffix(".png"), **records.WORKLOGS["cutlass"]["chart"])
    if os.environ.get("OUT"):
        shutil.copy(chart, os.environ["OUT"])
    return results


@pytest.mark.parametrize("kid", list(SPEC.kernels))
def test_each_reference_is_correct_at_every_check_shape_and_timed(graded, kid):
    result = graded[kid]
    assert result["status"] == "ok", f"{kid}: {result['message']} {result.get('stderr', '')[-1500:]}"
    assert result["score"]["correctness"] == SPEC.kernel(kid).points_correct
    shapes = {tuple(c["shape"]) for c in result["checks"] if c["ok"]}
    assert shapes >= set(SPEC.kernel(kid).check_shapes) | {SPEC.kernel(kid).perf_shape}, kid
    assert result["timing"]["kernel"]["samples"] >= 10


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_each_known_wrong_solution_gets_its_status_and_points(path):
    kid = tracks.graded_kernel(path)
    result = grade(kid, path.read_text())
    problem = tracks.unmet_expectation(path, result["status"], result["score"]["total"])
    assert not problem, f"{problem}: {result['message']}"


def _rung_result(rung: ladder.Rung) -> dict:
    """A rung's reference graded by its own engine (the CUDA ones without the sanitizer and ncu: the ladder needs
    their speed, and the tracks' own tests grade them whole)."""
    if rung.track in ("tensorcores", "cutlass"):
        kernel = load_spec(rung.track).kernel(rung.kernel)
        return grade_kernel(rung.track, rung.kernel, kernel.reference.read_text(), budget_s=BUDGET_S,
                            sanitize=False, profile=False).as_dict()
    if rung.track == "triton":
        from graders.triton_engine.grade import grade_triton
        from graders.triton_engine.kernel_source import kernel_from_cell
        from graders.triton_engine.spec import load_triton_spec
        kernel = load_triton_spec("triton").assignment.kernel(rung.kernel)
        return grade_triton("triton", rung.kernel, kernel_from_cell(kernel.reference.read_text(), kernel.function),
                            budget_s=BUDGET_S).as_dict()
    from graders.tilelang_engine.grade import grade_tilelang
    from graders.tilelang_engine.kernel_source import kernel_from_cell
    from graders.tilelang_engine.spec import load_tilelang_spec
    kernel = load_tilelang_spec("tilelang").kernel(rung.kernel)
    return grade_tilelang("tilelang", rung.kernel, kernel_from_cell(kernel.reference.read_text(), kernel.function),
                          budget_s=BUDGET_S).as_dict()


def test_the_ladder_rung_by_rung():
    """Every rung's reference graded at 4096^3 by its engine: the record and chart the feedback's ladder reads."""
    pytest.importorskip("tilelang", reason="the TileLang rung needs tilelang: run the ladder in the TileLang calls "
                        "(benchmarks/device_wheels.sh tilelang)")
    rungs, gpu = {}, None
    for rung in ladder.RUNGS:
        result = _rung_result(rung)
        assert result["status"] == "ok", f"{rung.name}: {result['message']}"
        assert result["lines_of_code"] > 0
        rungs[rung.name] = ladder.row(result) | {"track": rung.track, "kernel": rung.kernel}
        gpu = gpu or result.get("environment", {}).get("gpu")
    for name, row in rungs.items():
        print(f"{name:>9}: {row['lines_of_code']:3d} lines, {row['tflops']:6.1f} TFLOP/s, "
              f"{100 * row['share_of_cublas']:5.1f}% of cuBLAS ({row['cublas_tflops']:.1f} TFLOP/s)")
    path = records.write_gpu_record(ladder.RECORD_PREFIX, "the fp16 GEMM at 4096^3 on each rung of the abstraction "
                                    "ladder: lines of code, TFLOP/s, share of cuBLAS", {"rungs": rungs},
                                    dists=("triton", "tilelang", "nvidia-cutlass"), folder=ladder.RECORD_FOLDER)
    record = ladder.latest_record()
    assert record["rungs"] == json.loads(path.read_text())["rungs"]
    chart = path.with_suffix(".png")
    found = {f"{name}: reference": row for name, row in rungs.items()}
    chart.write_bytes(ladder.chart_png(found))
    if os.environ.get("OUT"):
        shutil.copy(chart, os.environ["OUT"])
