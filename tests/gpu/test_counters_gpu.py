"""The profiler as a grader on a real GPU: steps whose lesson is shared-memory bank conflicts earn their speed
points only with few of them (Nsight Compute, `graders.cuda_engine.counters`). The previous step handed in for
such a step keeps its correctness points and loses its speed points; the references keep everything.
Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_counters_gpu.py -s``."""
import pytest

from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec

pytestmark = pytest.mark.gpu
BUDGET_S = 1.0


def grade(track: str, kernel_id: str, source: str) -> dict:
    result = grade_kernel(track, kernel_id, source, budget_s=BUDGET_S, sanitize=False)
    print("\n" + report(result))
    return result.as_dict()


def reference(track: str, kernel_id: str) -> str:
    return load_spec(track).kernel(kernel_id).reference.read_text()


@pytest.mark.parametrize("track, kernel_id", [("transpose", "padded"), ("gemm", "linearize"), ("gemm", "swizzle")])
def test_a_reference_of_a_bank_conflict_step_keeps_its_speed_points(track, kernel_id):
    kernel = load_spec(track).kernel(kernel_id)
    result = grade(track, kernel_id, reference(track, kernel_id))
    assert result["status"] == "ok", result["message"]
    counter = result["counter"]
    assert counter["yours"] <= kernel.counter.at_most * counter["reference"] and counter["reference"] > 0


@pytest.mark.parametrize("track, kernel_id, previous", [("transpose", "padded", "tiled"),
                                                        ("gemm", "linearize", "vectorized"),
                                                        ("gemm", "swizzle", "vectorized")])
def test_the_previous_step_handed_in_loses_the_speed_points(track, kernel_id, previous):
    spec = load_spec(track)
    source = reference(track, previous).replace(spec.kernel(previous).function, spec.kernel(kernel_id).function)
    result = grade(track, kernel_id, source)
    assert result["status"] == "unmet", result["message"]
    assert result["points"] == spec.kernel(kernel_id).points_correct
    assert result["message"].startswith("correct, but its shared-memory bank conflicts (ncu, one launch at ")
