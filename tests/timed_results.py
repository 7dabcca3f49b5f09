"""Results as the trusted grader stores them in a graded cell (`graders.autograde.TrustedGrades`), for the
tests of feedback and exports: transpose kernels timed at a given ratio on an H200-like GPU."""
from __future__ import annotations

from nbformat.v4 import new_code_cell

from graders.autograde import RESULTS_KEY
from graders.cuda_engine.spec import load_spec
from graders.result import GradeResult, Status

SPEC = load_spec("transpose")


def timed(kernel_id: str, ratio: float, status: Status = Status.OK) -> dict:
    """A result as the CUDA engine records it, for a transpose kernel timed at ``ratio`` of a 0.128 ms copy."""
    kernel = SPEC.kernel(kernel_id)
    copy_s = 0.128e-3
    stats = {"median_s": copy_s / ratio, "throughput": 4.19e12 * ratio, "samples": 40}
    timing = {"shape": [8192, 8192], "work_unit": "B", "ratio": ratio, "verified_launches": 40,
              "kernel": stats, "baseline": {"name": "device-to-device copy", "median_s": copy_s,
                                            "throughput": 4.19e12, "samples": 40},
              "ceiling": {"roof": "dram", "throughput": 4.814e12}}
    return GradeResult(kernel_id, status, target="gpu", details={
        "timing": timing, "curve": {"floor": kernel.floor, "target": kernel.target},
        "environment": {"gpu": "NVIDIA H200"}}).as_dict()


def graded_cell(grade_id: str, results: list[dict]):
    cell = new_code_cell("score(...)", metadata={"nbgrader": {"grade": True, "solution": False, "locked": True,
                                                              "grade_id": grade_id, "points": 3}})
    cell.metadata[RESULTS_KEY] = {"results": results}
    return cell
