"""The profiler as a grader on a real GPU: steps whose lesson is shared-memory bank conflicts earn their speed
points as far as their count shows it (Nsight Compute, `graders.cuda_engine.counters`; the scale:
`graders.cuda_engine.scoring.counter_share`). The previous step handed in for such a step keeps its correctness
points and loses its speed points; a kernel with fewer conflicts, not few enough, keeps a share of them; the
references keep everything. The reference's count is profiled once per process.
Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_counters_gpu.py -s``."""
import pytest

from graders.cuda_engine import counters
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.scoring import perf_share
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


def test_four_way_conflicts_earn_a_share_of_the_speed_points():
    """The padded transpose padded by 4 floats instead of 1: a column read hits each bank 4 times (row stride 36:
    threads x and x + 8 share a bank), against the tiled reference's 32; about 10x fewer conflicts where the rule
    asks 20x, so its speed points are multiplied by a share between 0 and 1 and its status is unmet."""
    spec = load_spec("transpose")
    kernel = spec.kernel("padded")
    source = reference("transpose", "padded").replace("tile[TILE_Y][TILE_X + 1]", "tile[TILE_Y][TILE_X + 4]")
    assert "TILE_X + 4" in source
    result = grade("transpose", "padded", source)
    counter = result["counter"]
    print(f"padded + 4: {counter['yours']:,} / {counter['reference']:,} = "
          f"{counter['yours'] / counter['reference']:.4f}, share {counter['share']}")
    assert result["status"] == "unmet", result["message"]
    assert 0 < counter["share"] < 1
    speed = perf_share(result["timing"]["ratio"], kernel.floor, kernel.target)
    assert result["points"] == pytest.approx(kernel.points_correct + kernel.points_perf * speed * counter["share"])


def test_a_second_grading_profiles_only_the_students_kernel_and_the_kept_count_is_a_fresh_ones(monkeypatch):
    """The tiled reference's count is kept after the first grading of the padded step; profiled again, the
    reference gives the kept count to within 0.1% (two gradings of the mma reference differed by 0.01%; a
    hundredth of the rule's scale is 3% of the count)."""
    profiled = []
    count = counters.count

    def counting(request, function, metric, env, timeout_s):
        profiled.append(function)
        return count(request, function, metric, env, timeout_s)
    monkeypatch.setattr(counters, "count", counting)
    source = reference("transpose", "padded")
    first, second = grade("transpose", "padded", source), grade("transpose", "padded", source)
    assert profiled == ["transpose_padded", "transpose_tiled", "transpose_padded"]
    assert (first["counter"]["reference_cached"], second["counter"]["reference_cached"]) == (False, True)
    kept = second["counter"]["reference"]
    monkeypatch.setattr(counters, "_reference_counts", {})
    again = grade("transpose", "padded", source)["counter"]["reference"]
    print(f"tiled reference: kept {kept:,}, profiled again {again:,}")
    assert abs(again - kept) <= 0.001 * kept
