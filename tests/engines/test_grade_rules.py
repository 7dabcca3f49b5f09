"""The CUDA grader's parent side pinned at its edges (`graders.cuda_engine.grade`), without a GPU: the request sent
to the grading child, when the sanitizer and the profiler run, the points and message of every child outcome, the
report students read, and the compile checks of the notebook cells. The child itself is a recording stand-in."""
from __future__ import annotations

import dataclasses
import json
import os
import types
from dataclasses import asdict

import pytest

from graders import settings, targets_gpu
from graders.cuda_engine import grade
from graders.cuda_engine.compile import Compiled, CompileError, Resources
from graders.cuda_engine.scoring import score_kernel
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.hidden_tests import STUB_MARK
from graders.result import GradeResult, Status, collect
from graders.sandbox.run import ChildResult

TRANSPOSE = load_spec("transpose")
PADDED = TRANSPOSE.kernel("padded")     # has a counter rule
BEST = TRANSPOSE.kernel("best")         # the student's geometry, no counter rule
NAIVE = (settings.ROOT / "tracks/transpose/solutions/naive.cu").read_text()


def timing(ratio: float) -> dict:
    stats = {"median_s": 1.25e-3, "samples": 50}
    return {"ratio": ratio, "work_unit": "B", "kernel": stats | {"throughput": 1.5e12},
            "baseline": stats | {"median_s": 2.5e-3, "throughput": 3.25e12, "name": "device-to-device copy"}}


@pytest.fixture
def child(monkeypatch):
    """`grade_kernel` with a recording stand-in child (answering ``state["answer"]``), GPU check, sanitizer and
    profiler; ``WORKSHOP_SEED`` fixed and no budget override."""
    state = {"answer": {"status": "ok", "message": "", "timing": timing(1.0)}, "runs": [], "gpu": [],
             "sanitized": [], "counted": []}
    monkeypatch.setenv("WORKSHOP_SEED", "77")
    monkeypatch.delenv("WORKSHOP_PERF_BUDGET_S", raising=False)
    monkeypatch.delenv("WORKSHOP_SANITIZE", raising=False)

    def run_child(handler, request, **options):
        state["runs"].append((handler, request, options))
        return ChildResult("ok", answer=dict(state["answer"]), seconds=3.0)
    monkeypatch.setattr(grade, "run_child", run_child)
    monkeypatch.setattr(grade, "require_gpu", lambda what: state["gpu"].append(what))

    def sanitized(result, kernel, request, geometry):
        state["sanitized"].append((kernel.id, request, geometry))
        return result
    monkeypatch.setattr(grade, "sanitized", sanitized)

    def counted(result, spec, kernel, request, geometry):
        state["counted"].append((spec.name, kernel.id, request))
        return result
    monkeypatch.setattr(grade, "counted", counted)
    return state


def test_the_child_is_sent_the_kernel_and_the_spec_defaults(child):
    result = grade.grade_kernel("transpose", "padded", "src")
    (handler, request, options), = child["runs"]
    assert handler == grade.CHILD == "graders.cuda_engine.child"
    assert request == {"spec_path": str(TRANSPOSE.path.resolve()), "kernel_id": "padded", "source": "src",
                       "block": None, "tile": None, "params": None, "budget_s": TRANSPOSE.time_budget_s,
                       "memory_fraction": 0.25, "seed": 77, "launch_timeout_s": 10.0}
    assert options == {"timeout_s": TRANSPOSE.time_budget_s + grade.STARTUP_S,
                       "env": {"PYTHONPATH": grade._child_env()["PYTHONPATH"]}, "gpu": True, "reusable": True}
    assert child["gpu"] == ["Grading transpose/padded"]
    assert result.seed == 77 and result.status == Status.OK and result.details["seconds"] == 3.0
    assert child["sanitized"] == [("padded", request, PADDED.geometry)]
    assert child["counted"] == [("transpose", "padded", request)]


def test_the_students_launch_budget_limit_and_memory_fraction_are_sent(child, monkeypatch):
    monkeypatch.setenv("WORKSHOP_LAUNCH_TIMEOUT", "3")
    grade.grade_kernel("transpose", "best", "src", block=(16, 16), tile=(64, 64), budget_s=2.0, timeout_s=7.0,
                       memory_fraction=0.5)
    (_, request, options), = child["runs"]
    assert (request["block"], request["tile"], request["params"]) == ([16, 16], [64, 64], None)
    assert (request["budget_s"], request["memory_fraction"], options["timeout_s"]) == (2.0, 0.5, 7.0)
    assert request["launch_timeout_s"] == 3.0
    assert child["sanitized"][0][2] == resolve_geometry(BEST, (16, 16), (64, 64), None)
    assert child["counted"] == []        # best has no counter rule


def test_the_students_block_tile_and_params_each_reach_the_child_and_the_sanitizer(child):
    gemm = load_spec("gemm")
    autotuned = gemm.kernel("autotuned")
    params = {"BK": 16}
    grade.grade_kernel("gemm", "autotuned", "src", block=(8, 16), tile=(64, 128), params=params)
    (_, request, _), = child["runs"]
    assert (request["block"], request["tile"], request["params"]) == ([8, 16], [64, 128], {"BK": 16})
    assert request["params"] is not params        # a plain copy, sent as JSON
    geometry = resolve_geometry(autotuned, (8, 16), (64, 128), {"BK": 16})
    assert geometry.params == (("BK", 16),) and geometry.tile == (64, 128)
    assert child["sanitized"] == [("autotuned", request, geometry)]
    grade.grade_kernel("gemm", "autotuned", "src", params={"BK": 4})
    request = child["runs"][-1][1]
    assert (request["block"], request["tile"], request["params"]) == (None, None, {"BK": 4})
    assert child["sanitized"][-1][2] == resolve_geometry(autotuned, None, None, {"BK": 4}) != autotuned.geometry


def test_a_launch_the_spec_refuses_is_refused_before_any_child_runs(child):
    with pytest.raises(Exception, match="fixed launch geometry"):
        grade.grade_kernel("transpose", "padded", "src", block=(16, 16))
    assert child["runs"] == []


@pytest.mark.parametrize("text, budget", [("2.5", 2.5), ("", None), ("0", None), ("soon", None)])
def test_the_budget_comes_from_the_environment_only_when_positive(child, monkeypatch, text, budget):
    monkeypatch.setenv("WORKSHOP_PERF_BUDGET_S", text)
    grade.grade_kernel("transpose", "padded", "src")
    (_, request, options), = child["runs"]
    expected = budget if budget is not None else TRANSPOSE.time_budget_s
    assert request["budget_s"] == expected and options["timeout_s"] == expected + grade.STARTUP_S
    grade.grade_kernel("transpose", "padded", "src", budget_s=1.5)
    assert child["runs"][-1][1]["budget_s"] == 1.5


@pytest.mark.parametrize("status", list(Status))
def test_the_sanitizer_and_the_profiler_run_exactly_for_the_statuses_that_keep_correctness_points(child, status):
    child["answer"] = {"status": status, "message": "m"}
    grade.grade_kernel("transpose", "padded", "src")
    checked = status in (Status.OK, Status.IMPLAUSIBLE, Status.UNMET)
    assert grade.CORRECT == {Status.OK, Status.IMPLAUSIBLE, Status.UNMET}
    assert (len(child["sanitized"]), len(child["counted"])) == (int(checked), int(checked))


def test_the_sanitizer_and_the_profiler_can_each_be_left_out(child, monkeypatch):
    grade.grade_kernel("transpose", "padded", "src", sanitize=False)
    assert (len(child["sanitized"]), len(child["counted"])) == (0, 1)
    grade.grade_kernel("transpose", "padded", "src", profile=False)
    assert (len(child["sanitized"]), len(child["counted"])) == (1, 1)
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    grade.grade_kernel("transpose", "padded", "src")
    assert (len(child["sanitized"]), len(child["counted"])) == (1, 2)


def test_a_cpu_only_spec_does_not_ask_for_a_gpu(child, tmp_path):
    text = TRANSPOSE.path.read_text()
    assert "requires_gpu = true\n" in text
    (tmp_path / "spec.toml").write_text(text.replace("requires_gpu = true\n", "requires_gpu = false\n"))
    for kernel in TRANSPOSE.kernels.values():
        if kernel.reference:
            (tmp_path / kernel.reference.relative_to(TRANSPOSE.path.parent)).parent.mkdir(exist_ok=True)
            (tmp_path / kernel.reference.relative_to(TRANSPOSE.path.parent)).write_text("")
    grade.grade_kernel(tmp_path / "spec.toml", "naive", "src")
    assert child["gpu"] == [] and len(child["runs"]) == 1


@pytest.mark.parametrize("before, after", [
    (None, str(settings.PACKAGE_ROOT)),
    ("", str(settings.PACKAGE_ROOT)),
    ("/a:/b", os.pathsep.join([str(settings.PACKAGE_ROOT), "/a:/b"])),
])
def test_the_child_imports_the_graders_first(monkeypatch, before, after):
    if before is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", before)
    assert grade._child_env() == {"PYTHONPATH": after}


# --- each child outcome: status, message, points --------------------------------------------------------

def from_child(child_result: ChildResult, kernel=PADDED, limit_s=12.5) -> GradeResult:
    return grade.result_from_child(child_result, TRANSPOSE, kernel, limit_s, seed=9)


def test_a_child_past_its_limit_is_a_timeout_naming_the_limit():
    result = from_child(ChildResult("timeout", seconds=12.5))
    assert (result.status, result.points, result.max_points) == (Status.TIMEOUT, 0, PADDED.points)
    assert result.message == ("your kernel did not finish within 12.5 s (an endless loop? a __syncthreads() that "
                              "not every thread reaches?)")


def test_a_child_that_died_keeps_its_stderr_and_a_grader_error_its_traceback():
    died = from_child(ChildResult("crashed", message="killed by SIGSEGV", stderr="core dumped"))
    assert (died.status, died.message, died.details["stderr"]) == (Status.CRASHED,
                                                                  "the grading process died: killed by SIGSEGV",
                                                                  "core dumped")
    broke = from_child(ChildResult("ok", answer={"error": "KeyError: 'x'", "traceback": "tb"}, stderr="err"))
    assert (broke.status, broke.message) == (Status.GRADER_ERROR, "the grader failed: KeyError: 'x'")
    assert (broke.details["traceback"], broke.details["stderr"], broke.points) == ("tb", "err", 0)
    bare = from_child(ChildResult("ok", answer={"error": "E"}))
    assert bare.details["traceback"] == ""


@pytest.mark.parametrize("status", [Status.UNMET, Status.IMPLAUSIBLE])
def test_speed_not_credited_keeps_the_correctness_points_only(status):
    result = from_child(ChildResult("ok", answer={"status": status, "message": "m", "timing": timing(99.0)}))
    assert result.points == PADDED.points_correct and result.details["score"]["performance"] == 0


@pytest.mark.parametrize("status", [Status.INCORRECT, Status.OOB_WRITE, Status.CRASHED])
def test_a_wrong_kernel_scores_nothing_however_fast(status):
    result = from_child(ChildResult("ok", answer={"status": status, "message": "m", "timing": timing(99.0)}))
    assert result.points == 0 and result.max_points == PADDED.points


def test_a_correct_answer_is_scored_on_its_ratio_and_keeps_its_measurements():
    answer = {"status": "ok", "message": "", "timing": timing(PADDED.target), "checks": [{}, {}, {}],
              "kernel_id": "padded", "seed": 9, "environment": {"gpu": "H200"}}
    result = from_child(ChildResult("ok", answer=answer, seconds=4.5))
    assert (result.test, result.status, result.message, result.cases, result.seed) == ("padded", "ok", "", 3, 9)
    assert result.points == PADDED.points and result.target == "gpu"
    assert result.details == {
        "timing": timing(PADDED.target), "checks": [{}, {}, {}], "environment": {"gpu": "H200"},
        "score": score_kernel(PADDED, True, PADDED.target).as_dict(), "seconds": 4.5,
        "curve": {"floor": PADDED.floor, "target": PADDED.target, "targets": TRANSPOSE.targets,
                  "measured_on": list(targets_gpu.measured_on(TRANSPOSE.measured_in)), "track": "transpose",
                  "graded_on": "H200"}}


def test_a_correct_answer_without_timing_scores_nothing():
    result = from_child(ChildResult("ok", answer={"status": "ok"}))
    assert (result.points, result.message, result.cases) == (0, "", 0)


# --- the report -------------------------------------------------------------------------------------------

def test_the_report_of_a_timed_kernel_in_full():
    answer = {"status": "ok", "message": "", "timing": timing(0.5),
              "compile": {"resources": {"transpose_padded": {"registers": 30, "shared_bytes": 4224,
                                                              "stack_bytes": 0, "spill_stores": 0,
                                                              "spill_loads": 0}}}}
    result = from_child(ChildResult("ok", answer=answer))
    score = result.details["score"]
    assert grade.report(result) == "\n".join([
        "padded: ok",
        "  your kernel 1.2500 ms (1500 GB/s); device-to-device copy 2.5000 ms (3250 GB/s); ratio 0.500 "
        f"(full marks at {PADDED.target:g}, none below {PADDED.floor:g})",
        f"  transpose_padded: {grade.resources_summary(answer['compile']['resources']['transpose_padded'])}",
        f"  points: {score['total']:.2f} / 3 (correctness 1, speed {score['performance']:.2f})"])


def test_the_report_of_a_failed_kernel_starts_with_its_failure_line():
    result = from_child(ChildResult("ok", answer={"status": "incorrect", "message": "3 values wrong"}))
    assert grade.report(result).splitlines() == ["padded: incorrect (hidden, seed 9): 3 values wrong",
                                                 "  points: 0.00 / 3 (correctness 0, speed 0.00)"]


def test_the_report_names_the_counter_and_rounds_rates_to_whole_g_per_second():
    result = from_child(ChildResult("ok", answer={"status": "ok", "timing": timing(0.5)}))
    result.details["counter"] = {"metric": "shared_bank_conflicts", "shape": [8192, 8192], "yours": 1234567,
                                 "relative_to": "tiled", "reference": 20000000, "at_most": 0.05, "share": 0.92}
    lines = grade.report(result).splitlines()
    assert lines[2] == ("  shared-memory bank conflicts (ncu, one launch at 8192 x 8192): yours 1,234,567; the "
                        "reference of tiled 20,000,000; the bound 0.05 x that, 1,000,000")
    assert grade._rate(1.5e12, "B") == "1500 GB/s" and grade._rate(2000.5000005e9, "FLOP") == "2001 GFLOP/s"


def test_the_report_gives_the_share_of_the_instruction_ceiling_which_does_not_score():
    probed = timing(0.5) | {"work_unit": "FLOP", "instruction_ceiling": {"name": "mma.sync m16n8k16 bf16",
                                                                        "throughput": 6e12}}
    result = from_child(ChildResult("ok", answer={"status": "ok", "timing": probed}))
    assert grade.report(result).splitlines()[2] == ("  mma.sync m16n8k16 bf16, measured here: 6000 GFLOP/s; your "
                                                    "kernel at 25.0% of it (reported, not scored)")
    plain = from_child(ChildResult("ok", answer={"status": "ok", "timing": timing(0.5)}))
    assert result.details["score"] == plain.details["score"] and "measured here" not in grade.report(plain)


# --- the GPU the targets were measured on (graders.targets_gpu) --------------------------------------------

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def measured_spec(tmp_path, *gpus, extra=()):
    """TRANSPOSE with measured targets whose records (in ``tmp_path``) ran on ``gpus``; ``extra``: more records
    named as they are (missing, unreadable)."""
    names = []
    for i, gpu in enumerate(gpus):
        record = tmp_path / f"record-{i}.json"
        record.write_text(json.dumps({"track": "transpose", "gpu": gpu, "kernels": {}}))
        names.append(str(record))
    return dataclasses.replace(TRANSPOSE, targets="measured", measured_in=(*names, *extra))


def graded_on(spec, gpu, answer=None, kernel=PADDED) -> GradeResult:
    answer = {"status": "ok", "message": "", "timing": timing(0.5)} if answer is None else answer
    return grade.result_from_child(ChildResult("ok", answer=answer | {"environment": {"gpu": gpu}}), spec, kernel,
                                   12.5, seed=9)


def test_a_grading_on_another_gpu_than_the_targets_names_both_and_the_report_says_so(tmp_path):
    spec = measured_spec(tmp_path, H100, H100)
    result = graded_on(spec, H200)
    assert result.details["curve"] == {"floor": PADDED.floor, "target": PADDED.target, "targets": "measured",
                                       "measured_on": [H100], "track": "transpose", "graded_on": H200}
    lines = grade.report(result).splitlines()
    assert lines[2] == (f"  note: the speed targets were measured on {H100}, and this grading ran on {H200}: your "
                        "speed points compare against another GPU's references (even a reference kernel may get "
                        "only part of them here)")
    assert lines[1].startswith("  your kernel") and lines[-1].startswith("  points:")
    same = graded_on(spec, H100)
    assert (result.status, result.points, result.details["score"]) == (same.status, same.points,
                                                                       same.details["score"])   # grading unchanged


def test_a_grading_on_one_of_the_targets_gpus_says_nothing(tmp_path):
    spec = measured_spec(tmp_path, H100, H200)
    result = graded_on(spec, H200)
    assert result.details["curve"]["measured_on"] == [H100, H200]
    assert "note:" not in grade.report(result) and targets_gpu.ta_lines([result.as_dict()]) == []


def test_provisional_targets_say_nothing_of_a_gpu():
    provisional = dataclasses.replace(TRANSPOSE, targets="provisional", measured_in=())
    result = graded_on(provisional, H200)
    assert result.details["curve"]["measured_on"] == [] and result.details["curve"]["graded_on"] == H200
    assert "note:" not in grade.report(result) and targets_gpu.ta_lines([result.as_dict()]) == []


def test_a_missing_or_unreadable_record_is_skipped(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "no-gpu.json").write_text("{}")
    unreadable = [str(tmp_path / name) for name in ("gone.json", "broken.json", "list.json", "no-gpu.json")]
    spec = measured_spec(tmp_path, H100, extra=unreadable)
    assert graded_on(spec, H200).details["curve"]["measured_on"] == [H100]
    nothing = dataclasses.replace(spec, measured_in=tuple(unreadable))
    result = graded_on(nothing, H200)
    assert result.details["curve"]["measured_on"] == [] and "note:" not in grade.report(result)


def test_a_notebook_names_the_targets_gpu_or_says_they_are_provisional(tmp_path):
    measured = measured_spec(tmp_path, H100, H200)
    assert targets_gpu.targets_note(measured.targets, measured.measured_in) == (
        f" (targets measured on {H100} and {H200})")
    assert targets_gpu.targets_note("provisional", ()) == " (provisional until measured on the grading GPU)"
    assert targets_gpu.targets_note("measured", [str(tmp_path / "gone.json")]) == ""


def test_a_record_path_is_under_the_checkout(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "r.json").write_text(json.dumps({"gpu": H100}))
    monkeypatch.setattr(settings, "ROOT", tmp_path)
    assert targets_gpu.measured_on(["benchmarks/r.json", "benchmarks/gone.json"]) == (H100,)


def test_an_answer_without_its_gpu_or_without_timing_adds_no_note(tmp_path):
    spec = measured_spec(tmp_path, H100)
    bare = grade.result_from_child(ChildResult("ok", answer={"status": "ok", "timing": timing(0.5)}), spec, PADDED,
                                   12.5, seed=9)
    assert "graded_on" not in bare.details["curve"] and "note:" not in grade.report(bare)
    unbuilt = graded_on(spec, H200, {"status": "compile_error", "message": "error: expected ';'"})
    assert unbuilt.details["curve"]["graded_on"] == H200 and "note:" not in grade.report(unbuilt)
    for child in (ChildResult("timeout", seconds=12.5), ChildResult("crashed", message="SIGSEGV"),
                  ChildResult("ok", answer={"error": "E"})):
        failed = grade.result_from_child(child, spec, PADDED, 12.5, seed=9)
        assert "graded_on" not in failed.details["curve"] and "note:" not in grade.report(failed)


def test_the_tas_line_is_one_per_track_and_says_how_to_remeasure(tmp_path):
    spec = measured_spec(tmp_path, H100)
    results = [graded_on(spec, H200, kernel=kernel).as_dict() for kernel in (PADDED, BEST)]
    assert targets_gpu.ta_lines(results + [{"test": "other"}, {"curve": {"floor": 0.1}}]) == [
        f"transpose: speed targets measured on {H100}, this grading ran on {H200}: speed points compare against "
        "another GPU's references. Re-measure them on this GPU: `bash benchmarks/gpu_trusted.sh regrade transpose`, "
        "then `workshop targets transpose RECORD... --write`"]


# --- the sanitizer's and the profiler's verdicts ---------------------------------------------------------

def ok_result(details=None) -> GradeResult:
    return GradeResult("padded", Status.OK, points=3.0, max_points=3.0, target="gpu",
                       details={"score": {}} | (details or {}))


def test_the_sanitizer_is_given_the_childs_request_launch_and_environment(monkeypatch):
    calls = []
    checked = {"shape": [33, 65], "tools": {}, "failure": ""}
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args: calls.append(args) or checked)
    result = grade.sanitized(ok_result(), PADDED, {"source": "s"}, PADDED.geometry)
    assert calls == [({"source": "s"}, PADDED, PADDED.geometry, grade._child_env(), grade.sanitizer.TOOLS)]
    assert result.details["sanitizer"] is checked and result.points == 3.0


def test_a_sanitizer_finding_keeps_the_tools_report(monkeypatch):
    checked = {"shape": [33, 65], "tools": {"memcheck": "found"}, "failure": "found"}
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args: checked)
    result = grade.sanitized(ok_result({"compile": {}}), PADDED, {}, PADDED.geometry)
    assert (result.status, result.message, result.points) == (Status.INCORRECT, "found", 0)
    assert result.details["sanitizer"] is checked and result.details["score"]["total"] == 0


def test_the_profiler_is_given_the_spec_kernel_request_and_environment(monkeypatch):
    calls = []
    measured = {"failure": "", "metric": "m"}
    monkeypatch.setattr(grade.counters, "measure", lambda *args: calls.append(args) or measured)
    grade.counted(ok_result(), TRANSPOSE, PADDED, {"source": "s"}, PADDED.geometry)
    assert calls == [(TRANSPOSE, PADDED, {"source": "s"}, grade._child_env())]


def test_a_profiler_failure_is_named_in_the_grader_error(monkeypatch):
    def broken(*args):
        raise grade.counters.ProfilingFailed("ncu gave nothing")
    monkeypatch.setattr(grade.counters, "measure", broken)
    result = grade.counted(ok_result(), TRANSPOSE, PADDED, {}, PADDED.geometry)
    assert (result.status, result.message, result.points) == (Status.GRADER_ERROR,
                                                              "the grader failed: ncu gave nothing", 0)


def test_a_count_over_the_rule_does_not_rescore_a_kernel_whose_speed_is_already_not_credited(monkeypatch):
    monkeypatch.setattr(grade.counters, "measure", lambda *args: {"failure": "too many conflicts"})
    unmet = GradeResult("padded", Status.UNMET, "uses tensor cores", points=1.0, max_points=3.0, target="gpu",
                        details={"score": {}})
    result = grade.counted(unmet, TRANSPOSE, PADDED, {}, PADDED.geometry)
    assert (result.status, result.message, result.points) == (Status.UNMET, "uses tensor cores", 1.0)
    assert result.details["counter"] == {"failure": "too many conflicts"}


# --- score: the hidden test ------------------------------------------------------------------------------

@pytest.fixture
def graded(monkeypatch):
    """`score` with `grade_kernel` answering ``state["result"]``."""
    state = {"result": None, "calls": []}

    def grade_kernel(*args, **options):
        state["calls"].append((args, options))
        return state["result"]
    monkeypatch.setattr(grade, "grade_kernel", grade_kernel)
    return state


@pytest.mark.parametrize("status", [Status.OK, Status.IMPLAUSIBLE, Status.UNMET])
def test_score_returns_the_points_rounded_for_every_status_that_keeps_correctness_points(graded, capsys, status):
    graded["result"] = from_child(ChildResult("ok", answer={"status": status, "message": "m",
                                                            "timing": timing(PADDED.floor + 1e-7)}))
    with collect() as published:
        points = grade.score("transpose", "padded", "src", budget_s=1.0)
    assert points == round(graded["result"].points, 4) and published == [graded["result"]]
    assert graded["calls"] == [(("transpose", "padded", "src"), {"budget_s": 1.0})]
    assert capsys.readouterr().out == grade.report(graded["result"]) + "\n"


def test_score_raises_for_a_wrong_kernel_with_its_failure_line(graded, capsys):
    graded["result"] = from_child(ChildResult("ok", answer={"status": "incorrect", "message": "3 values wrong"}))
    with pytest.raises(grade.KernelFailed) as failed:
        grade.score("transpose", "padded", "src")
    assert str(failed.value) == "padded: incorrect (hidden, seed 9): 3 values wrong"
    assert capsys.readouterr().out.startswith("padded: incorrect (hidden, seed 9): 3 values wrong\n")


# --- the compile checks of the notebook's cells -----------------------------------------------------------

STUB = f"__global__ void transpose_naive(float* out, const float* in, int rows, int cols) {{\n    {STUB_MARK}\n}}\n"
BROKEN = NAIVE + "\nint broken = undefined_name;\n"


def test_the_check_cell_says_not_written_yet_for_the_stub(capsys):
    grade.check("transpose", "naive", STUB)
    assert capsys.readouterr().out == "✗ naive: not written yet (its body is still the stub's comment)\n"


def test_the_check_cell_prints_the_compile_error_and_never_raises(capsys):
    grade.check("transpose", "naive", BROKEN)
    out = capsys.readouterr().out
    assert out.startswith("✗ naive: ") and "error" in out and out.count("\n") >= 1


def test_the_check_cell_prints_the_launch(capsys, monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    grade.detect_gpu.cache_clear()
    try:
        grade.check("transpose", "best", NAIVE.replace("transpose_naive", "transpose_best"), block=(16, 16),
                    tile=(32, 16))
    finally:
        grade.detect_gpu.cache_clear()
    compiled, previewed = capsys.readouterr().out.splitlines()
    assert compiled.startswith("transpose_best compiles for sm_90: ")
    assert compiled.endswith(". Launched as <<<grid, (16, 16)>>>, a 32 x 16 tile per block. Correctness and speed "
                             "are checked on the GPU worker.")
    # one element per thread of a 16 x 16 block leaves half of each 32 x 16 tile unwritten: the CPU preview says so
    assert previewed.startswith("✗ best: CPU preview, shape 33 x 65 (rows, cols): 561 of 2145 values wrong; ")


@pytest.fixture
def compiler(monkeypatch):
    """`grade`'s compiler and GPU lookup replaced: ``state["gpu"]`` is what `detect_gpu` answers, ``state["report"]``
    whether ptxas reported on the kernel; every compile is recorded."""
    state = {"gpu": None, "report": True, "calls": []}

    def compile_cuda(source, *, kernels, defines, arch, libraries):
        assert libraries == ()   # no header libraries but where a spec names them (the CUTLASS track)
        state["calls"].append((source, kernels, defines, arch))
        resources = {kernels[0]: Resources(40, 8192, 0, 4, 8)} if state["report"] else {}
        return Compiled(b"", arch, resources | {"other": Resources(1, 0, 0, 0, 0)}, "")
    monkeypatch.setattr(grade, "compile_cuda", compile_cuda)
    monkeypatch.setattr(grade, "detect_gpu", lambda: state["gpu"])
    return state


def test_the_check_cell_compiles_the_students_launch_for_the_gpu_found(compiler, capsys):
    gemm = load_spec("gemm")
    compiler["gpu"] = types.SimpleNamespace(arch="sm_100")
    resources = grade.check_compiles("gemm", "autotuned", "src", block=(8, 16), tile=(64, 128), params={"BK": 16})
    geometry = resolve_geometry(gemm.kernel("autotuned"), (8, 16), (64, 128), {"BK": 16})
    assert compiler["calls"] == [("src", ("sgemm_autotuned",), geometry.defines(), "sm_100")]
    assert geometry.defines()["BK"] == 16
    assert resources == {"sgemm_autotuned": asdict(Resources(40, 8192, 0, 4, 8)),
                         "other": asdict(Resources(1, 0, 0, 0, 0))}
    assert capsys.readouterr().out == (
        "sgemm_autotuned compiles for sm_100: 40 registers, 8192 B shared memory, 12 B of spills. Launched as "
        "<<<grid, (8, 16)>>>, a 64 x 128 tile per block, BK = 16. Correctness and speed are checked on the GPU "
        "worker.\n")


def test_the_check_cell_without_a_gpu_compiles_for_the_default_arch_and_names_every_param(compiler, capsys):
    compiler["report"] = False        # ptxas said nothing about the kernel
    grade.check_compiles("gemm", "warptiling", "src")
    warptiling = load_spec("gemm").kernel("warptiling")
    assert compiler["calls"] == [("src", ("sgemm_warptiling",), warptiling.geometry.defines(), grade.DEFAULT_ARCH)]
    (x, y), (tx, ty) = warptiling.geometry.block, warptiling.geometry.tile
    assert capsys.readouterr().out == (
        f"sgemm_warptiling compiles for {grade.DEFAULT_ARCH}: registers unknown, shared memory unknown, spills "
        f"unknown. Launched as <<<grid, ({x}, {y})>>>, a {tx} x {ty} tile per block, BK = 8, WM = 64, WN = 64. "
        "Correctness and speed are checked on the GPU worker.\n")


def test_the_graded_cells_public_part_raises_unless_written_and_compiling(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    with pytest.raises(grade.KernelFailed) as stub:
        grade.assert_compiles("transpose", "naive", STUB)
    assert str(stub.value) == "naive: not written yet (its body is still the stub's comment)"
    with pytest.raises(grade.KernelFailed) as broken:
        grade.assert_compiles("transpose", "naive", BROKEN)
    assert str(broken.value).startswith("naive: ") and "error" in str(broken.value)
    capsys.readouterr()
    monkeypatch.setenv("WORKSHOP_CPU_PREVIEW", "off")
    grade.assert_compiles("transpose", "naive", NAIVE)
    assert capsys.readouterr().out == "✓ naive compiles; correctness and speed are checked on the GPU worker.\n"


def test_the_graded_cells_public_part_passes_the_launch_to_the_compiler(monkeypatch):
    monkeypatch.setenv("WORKSHOP_CPU_PREVIEW", "off")
    calls = []
    monkeypatch.setattr(grade, "_compile", lambda *args: calls.append(args) or ({}, ""))
    grade.assert_compiles("transpose", "best", "src", block=(16, 16), tile=(32, 16), params={"X": 1})
    grade.assert_compiles("transpose", "best", "src")
    assert calls == [("transpose", "best", "src", (16, 16), (32, 16), {"X": 1}),
                     ("transpose", "best", "src", None, None, None)]

    def refuses(*args):
        raise CompileError("line 3: error")
    monkeypatch.setattr(grade, "_compile", refuses)
    with pytest.raises(grade.KernelFailed) as failed:
        grade.assert_compiles("transpose", "best", "src")
    assert str(failed.value) == "best: line 3: error"


def test_the_graded_cells_public_part_leaves_autograding_to_the_hidden_tests(capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr(grade, "_compile", lambda *args: pytest.fail("compiled while autograding"))
    grade.assert_compiles("transpose", "naive", STUB)
    assert capsys.readouterr().out == "naive: not checked here while autograding; the hidden tests grade it.\n"
