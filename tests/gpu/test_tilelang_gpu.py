"""The TileLang track on a real GPU: each reference and each known-wrong solution graded by the engine
(`graders.tilelang_engine.grade.grade_tilelang`, one sandboxed child each, TileLang compiling there with nvcc for
the GPU's architecture), the check cell on the GPU, the ladder's rungs side by side (the fp16 GEMM in CUDA C++,
Triton and TileLang, each its track's reference: lines of code, TFLOP/s, share of cuBLAS, a record and its chart), and the track autograded by nbgrader: the reference full
marks, the untouched stub 0, each known-wrong solution exactly its ``expect:`` points. Records go to
benchmarks/results/tilelang/.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_tilelang_gpu.py -x -q -s`` (``-s`` shows the
reports). ``WORKSHOP_PERF_BUDGET_S`` (default here 1.5 s) is the timing budget per kernel.
"""
from __future__ import annotations

import ast
import os
import shutil

import pytest

from graders import tracks
from graders.cuda_engine import grade as cuda_grade
from graders.cuda_engine.grade import report
from graders.cuda_engine.spec import load_spec
from graders.tilelang_engine import grade
from graders.tilelang_engine.kernel_source import kernel_from_cell
from graders.tilelang_engine.spec import load_tilelang_spec
from graders.triton_engine import grade as triton_grade
from graders.triton_engine.kernel_source import kernel_from_cell as triton_kernel_from_cell
from graders.triton_engine.spec import load_triton_spec
from workshop.course import Autograding, Course, stderr_text
from workshop.records import write_gpu_record
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


def lines_of_code(source: str, comment: str = "#") -> int:
    """Lines of a kernel's source that are code: neither blank nor comments (nor, in Python, docstrings)."""
    docstrings = set()
    if comment == "#":
        docstrings = {n.value.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Expr)
                      and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    return sum(1 for number, line in enumerate(source.split("\n"), start=1)
               if line.strip() and not line.strip().startswith(comment) and number not in docstrings)


def chart(rungs: dict, gpu: str, path) -> None:
    """The ladder's rungs: each one's lines of code, and its share of cuBLAS (its TFLOP/s on the bar)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rungs)
    fig, (lines, shares) = plt.subplots(1, 2, figsize=(10, 4))
    lines.bar(names, [rungs[n]["lines_of_code"] for n in names], color="tab:blue")
    lines.set_ylabel("lines of kernel code")
    bars = shares.bar(names, [100 * rungs[n]["share_of_cublas"] for n in names], color="tab:green")
    for bar, n in zip(bars, names):
        shares.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{rungs[n]['tflops']:.0f} TFLOP/s",
                    ha="center", va="bottom", fontsize=8)
    shares.axhline(100, color="black", linestyle="--", linewidth=1)
    shares.set_ylabel("% of cuBLAS")
    fig.suptitle(f"The abstraction ladder's fp16 GEMM at 4096^3 on {gpu}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@pytest.fixture(scope="module")
def references() -> dict[str, dict]:
    """Each reference graded once, by kernel id."""
    return {kid: _graded(kid, kernel.reference) for kid, kernel in SPEC.kernels.items()}


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


def test_the_rungs_side_by_side(references):
    """The fp16 GEMM at 4096^3 on three rungs, each its track's reference graded here: CUDA C++ (the tensor-core
    worklog's fp16 step: mma.sync, fp32 out), Triton and TileLang (fp16 out); lines of code, TFLOP/s and the share of
    the cuBLAS GEMM each is timed against, in one record and its chart."""
    cuda = load_spec("tensorcores").kernel("fp16")
    cuda_source = cuda.reference.read_text()
    triton_spec = load_triton_spec("triton").assignment.kernel("matmul_fp16")
    triton_kernel = triton_kernel_from_cell(triton_spec.reference.read_text(), triton_spec.function)
    tilelang_kernel = kernel_from_cell(SPEC.kernel("matmul_fp16").reference.read_text(), "matmul_fp16")
    graded = [("CUDA C++", cuda_grade.grade_kernel("tensorcores", "fp16", cuda_source, budget_s=BUDGET_S,
                                                   sanitize=False, profile=False).as_dict(),
               lines_of_code(cuda_source, "//")),
              ("Triton", triton_grade.grade_triton("triton", "matmul_fp16", triton_kernel, budget_s=BUDGET_S).as_dict(),
               lines_of_code(triton_kernel.source)),
              ("TileLang", references["matmul_fp16"], lines_of_code(tilelang_kernel.source))]
    rungs, gpu = {}, "?"
    for rung, result, lines in graded:
        assert result["status"] == "ok", f"{rung}: {result['message']}"
        timing = result["timing"]
        gpu = result.get("environment", {}).get("gpu", gpu)
        rungs[rung] = {"lines_of_code": lines, "tflops": timing["kernel"]["throughput"] / 1e12,
                       "cublas_tflops": timing["baseline"]["throughput"] / 1e12, "share_of_cublas": timing["ratio"],
                       "shape": timing["shape"]}
    for rung, row in rungs.items():
        print(f"{rung:>9}: {row['lines_of_code']:3d} lines, {row['tflops']:6.1f} TFLOP/s, "
              f"{100 * row['share_of_cublas']:5.1f}% of cuBLAS ({row['cublas_tflops']:.1f} TFLOP/s)")
    path = write_gpu_record("tilelang-ladder-gemm", "the fp16 GEMM at 4096^3 on the CUDA C++, Triton and TileLang "
                            "rungs: lines of code, TFLOP/s, share of cuBLAS", {"rungs": rungs},
                            dists=("tilelang", "triton"), folder="tilelang")
    chart(rungs, gpu, path.with_suffix(".png"))
    if os.environ.get("OUT"):
        shutil.copy(path.with_suffix(".png"), os.environ["OUT"])


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
