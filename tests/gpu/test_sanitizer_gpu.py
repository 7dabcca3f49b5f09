"""compute-sanitizer as a grader on a real GPU: a shared-memory race costs the kernel its points with
racecheck's own line; clean references keep everything, with every tool run and silent.
Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_sanitizer_gpu.py -s``."""
from pathlib import Path

import pytest

from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec

pytestmark = pytest.mark.gpu
BUDGET_S = 1.0


def grade(track: str, kernel_id: str, source: str) -> dict:
    result = grade_kernel(track, kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result), result.details.get("sanitizer"))
    return result.as_dict()


def test_a_tile_read_without_a_barrier_loses_its_points():
    result = grade("transpose", "tiled", (Path(__file__).parent / "cheats/tiled_no_barrier.cu").read_text())
    assert result["status"] == "incorrect" and result["points"] == 0, result["message"]
    if "sanitizer" in result:    # correct on the GPU by chance: racecheck caught it
        assert result["message"].startswith("compute-sanitizer --tool racecheck found ")
        assert "Race reported" in result["message"]


@pytest.mark.parametrize("track, kernel_id", [("transpose", "padded"), ("gemm", "warptiling"),
                                              ("vecadd", "add")])
def test_a_clean_reference_keeps_its_points_under_every_tool(track, kernel_id):
    kernel = load_spec(track).kernel(kernel_id)
    result = grade(track, kernel_id, kernel.reference.read_text())
    assert result["status"] == "ok", result["message"]
    tools = result["sanitizer"]["tools"]
    shared = result["compile"]["resources"][kernel.function]["shared_bytes"]
    assert set(tools) == ({"memcheck", "racecheck", "initcheck"} if shared != 0 else {"memcheck", "initcheck"})
    assert not any(tools.values()), tools


FAR_WRITE = """
@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    out[i] = a[i] + 10
    if i == 0:
        out[i + 16777216] = 1.0
"""


def test_memcheck_reports_a_puzzle_kernel_writing_far_past_its_output():
    """Past the guard bands, which catch near misses: compute-sanitizer's memcheck sees the write itself."""
    from puzzle_cells import run_cells

    from graders.numba_engine import grade as puzzle_grade
    from graders.numba_engine.kernel_source import kernel_source
    source, name = kernel_source(run_cells(FAR_WRITE)["map_kernel"])
    finding = puzzle_grade.sanitizer_finding("map", source, name, 1)
    assert finding.startswith("compute-sanitizer --tool memcheck found "), finding
    assert "Invalid __global__ write" in finding, finding


def test_the_gpu_run_under_memcheck_grades_and_finds_in_one_child():
    """`checked_gpu_run`'s GPU run is memcheck's: the reference's verdict is the GPU's own and memcheck silent; the far
    write is memcheck's finding (the run itself stopped by the tool)."""
    from puzzle_cells import REFERENCE, run_cells

    from graders.numba_engine import grade as puzzle_grade
    from graders.numba_engine.kernel_source import kernel_source
    from graders.result import Status
    run, finding = puzzle_grade.gpu_run("map", *kernel_source(run_cells(REFERENCE["map"])["map_kernel"]), 1)
    assert run.status == Status.OK and run.target == "gpu" and run.seed == 1 and finding == "", (run, finding)
    run, finding = puzzle_grade.gpu_run("map", *kernel_source(run_cells(FAR_WRITE)["map_kernel"]), 1)
    assert "Invalid __global__ write" in finding, (run, finding)


def test_a_submissions_puzzles_run_in_one_memcheck_and_one_racecheck_child():
    """Every reference's GPU run from the submission's batch, racecheck clearing the shared-memory ones; a batch
    with the far write in it clears none (each puzzle's test then does its own checks)."""
    from puzzle_cells import REFERENCE, run_cells

    from graders.numba_engine import catalogue
    from graders.numba_engine import grade as puzzle_grade
    from graders.numba_engine.kernel_source import SubmittedKernel, kernel_source

    def call(puzzle_id: str, cell: str):
        return (puzzle_id, SubmittedKernel(*kernel_source(run_cells(cell)[catalogue.get(puzzle_id).kernel_name]))), {}
    calls = [call(p.id, REFERENCE[p.id]) for p in catalogue.PUZZLES]
    values = puzzle_grade.prepare_correctness_together(calls)
    assert all(isinstance(v, dict) and v["run"].status == "ok" and v["run"].target == "gpu" for v in values), values
    shared = {args[0] for args, _ in calls if "cuda.shared.array" in args[1].source}
    assert shared and {args[0] for (args, _), v in zip(calls, values) if v["racecheck_cleared"]} == shared
    values = puzzle_grade.prepare_correctness_together([calls[1], call("map", FAR_WRITE)])
    assert all(isinstance(v, puzzle_grade.NotBatched) for v in values), values


def test_a_clean_puzzle_kernel_is_silent_under_the_sanitizer():
    from puzzle_cells import REFERENCE, run_cells

    from graders.numba_engine import grade as puzzle_grade
    from graders.numba_engine.kernel_source import kernel_source
    source, name = kernel_source(run_cells(REFERENCE["matmul"])["matmul_kernel"])
    assert puzzle_grade.sanitizer_finding("matmul", source, name, 1) == ""
