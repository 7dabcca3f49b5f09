"""The debugging track (L7) on a real GPU: each sabotaged kernel scores 0 for the reason its planted bug gives (the
race: racecheck, or wrong sums where it shows; the misaligned float4: the GPU's own misaligned-address error, with
memcheck's report of the faulting access and its line, and the exception and line cuda-gdb reads from the CUDA core
dump (the spec's ``explain_crash``); the
softmax: NaN; the divergent barrier: the time limit, after which the session grades the next kernel); each is
caught by the tool the key names, at the shape that shows it; each reference fix is right and clean under all four
tools; a whole reference submission is graded by nbgrader within 60 s, and the untouched one's feedback shows what
the GPU worker saw. The known-wrong fixes' ``expect:`` points, the reference's full marks and the stub's 0 through
nbgrader are tests/gpu/test_tracks_nbgrader_gpu.py's, for every CUDA track.
Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_debugging_gpu.py -s``."""
from __future__ import annotations

import time

import pytest

from graders import settings, tracks
from graders.cuda_engine import grade, sanitizer
from graders.cuda_engine.spec import load_spec
from graders.quiz_engine.grade import answer_key
from graders.result import hidden_seed
from graders.sandbox.run import run_child
from graders.sandbox.session import ChildSession
from workshop.course import Autograding, Course, stderr_text
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers

pytestmark = pytest.mark.gpu
SPEC = load_spec("debugging")
SABOTAGED = tracks.get("debugging").problem_module().SABOTAGED
BUDGET_S = 1.0
HANG_LIMIT_S = 45.0   # the hanging kernel's child: its start, the shapes before the one that hangs, then the hang


def graded(kernel_id: str, source: str, **options) -> dict:
    result = grade.grade_kernel("debugging", kernel_id, source, budget_s=BUDGET_S, **options)
    print("\n" + grade.report(result), result.details.get("sanitizer"))
    return result.as_dict()


def test_the_untouched_race_scores_zero_and_racecheck_names_it_when_the_sums_come_out_right():
    result = graded("reduce", SABOTAGED["reduce"])
    assert result["status"] == "incorrect" and result["points"] == 0, result["message"]
    if "sanitizer" in result:
        assert result["message"].startswith("compute-sanitizer --tool racecheck found ")
        assert result["sanitizer"]["shape"] == [3, 4097]


def test_the_untouched_misaligned_copy_crashes_and_its_feedback_shows_memchecks_report_of_the_faulting_line():
    result = graded("copy", SABOTAGED["copy"])
    assert result["status"] == "crashed" and result["points"] == 0, result["message"]
    assert "misaligned" in result["message"].lower(), result["message"]
    assert [c["shape"] for c in result["checks"]] == [[4, 1024], [1, 1], [1, 37]]   # right until rows misalign
    line = answer_key("debugging")["copy_line"]
    assert result["crash_report"]["shape"] == [5, 1001]
    assert "compute-sanitizer --tool memcheck, one launch at shape 5x1001:" in result["message"]
    assert "Invalid __global__ read of size 16 bytes" in result["message"], result["message"]
    assert f"your_kernel.cu:{line}" in result["message"], result["message"]
    dumped = result["crash_report"]["core_dump"]   # CUDA's core dump read with cuda-gdb on the worker
    assert dumped and dumped[0] == "CUDA Exception: Warp Misaligned Address", result["crash_report"]
    assert any(f"your_kernel.cu:{line}" in d for d in dumped), dumped


def test_the_untouched_softmax_scores_zero_for_its_nan():
    result = graded("softmax", SABOTAGED["softmax"])
    assert result["status"] == "incorrect" and "NaN" in result["message"], result["message"]


def test_the_hang_is_a_timeout_found_at_the_launch_limit_and_the_next_kernel_is_graded():
    """The hung launch is caught by the child's launch limit (`settings.launch_timeout_s`), in seconds, long before
    the child's own limit; the child leaves at once, and the next kernel gets a fresh one."""
    launch_limit = settings.launch_timeout_s()
    with ChildSession():
        started = time.monotonic()
        hung = graded("chunked", SABOTAGED["chunked"], timeout_s=HANG_LIMIT_S)
        print(f"the hang graded in {time.monotonic() - started:.1f} s")
        assert time.monotonic() - started < HANG_LIMIT_S
        assert hung["status"] == "timeout" and hung["points"] == 0
        assert hung["message"].startswith(f"your kernel did not finish within {launch_limit:g} s of its launch at "
                                          "shape "), hung["message"]
        after = graded("reduce", SPEC.kernel("reduce").reference.read_text())
        assert after["status"] == "ok", after["message"]


def under(tool: str, kernel_id: str, source: str, shape: tuple[int, ...]) -> str:
    """``tool``'s finding on one launch at ``shape`` (whether the launch itself then failed or not)."""
    request = {"spec_path": str(SPEC.path), "kernel_id": kernel_id, "source": source, "seed": hidden_seed(),
               "shape": list(shape)}
    run = run_child(sanitizer.CHILD, request, timeout_s=sanitizer.TIMEOUT_S, gpu=True,
                    wrapper=sanitizer.tool_wrapper(tool, SPEC.kernel(kernel_id).function), env=grade._child_env())
    print(f"\n{tool} on {kernel_id} at {shape}:\n{run.stdout[-3000:]}")
    return sanitizer.findings(tool, run.stdout)


KEYED = {"a": "memcheck", "b": "racecheck", "c": "initcheck", "d": "synccheck"}


@pytest.mark.parametrize("kernel_id, shape", [("reduce", (3, 4097)), ("copy", (5, 1001)), ("softmax", (4, 1000))])
def test_each_sabotaged_kernel_is_caught_by_the_tool_the_key_names_and_by_no_tool_when_it_says_none(kernel_id, shape):
    keyed = answer_key("debugging")[f"{kernel_id}_tool"]
    for tool in KEYED.values() if keyed not in KEYED else [KEYED[keyed]]:
        finding = under(tool, kernel_id, SABOTAGED[kernel_id], shape)
        assert bool(finding) == (keyed in KEYED), (tool, finding)
    if kernel_id == "copy":
        assert "Invalid __global__ read of size 16 bytes" in finding, finding


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_each_reference_fix_is_right_and_clean_under_all_four_tools(kernel_id):
    kernel = SPEC.kernel(kernel_id)
    result = graded(kernel_id, kernel.reference.read_text())
    assert result["status"] == "ok", result["message"]
    tools = result["sanitizer"]["tools"]
    shared = result["compile"]["resources"][kernel.function]["shared_bytes"]
    assert set(tools) == {"memcheck", "initcheck", "synccheck"} | ({"racecheck"} if shared else set())
    assert not any(tools.values()) and result["sanitizer"]["shape"] == list(sanitizer.sanitize_shape(
        kernel, kernel.geometry))


def test_the_check_cell_runs_the_four_tools_at_its_shape_and_prints_each_verdict(capsys):
    sanitizer.check("debugging", "reduce", SABOTAGED["reduce"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("block_sum compiles for sm_90") and len(lines) == 5, lines
    assert lines[2].startswith("✗ compute-sanitizer --tool racecheck found "), lines   # the race, at 4 x 1000 too
    sanitizer.check("debugging", "reduce", SPEC.kernel("reduce").reference.read_text())
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"✓ compute-sanitizer --tool {tool}: no error at shape 4x1000"
        for tool in ("memcheck", "racecheck", "initcheck", "synccheck")]


def test_a_reference_submission_in_a_minute_and_the_untouched_ones_feedback_shows_what_the_worker_saw(
        tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_CELL_TIMEOUT", "150")
    grading = Autograding(Course(tmp_path / "course", "debugging"))
    scores = grading.grade("reference", cuda_answers("debugging"))
    assert scores and all(scores.values()), scores
    assert grading.seconds["reference"] <= 60, grading.seconds
    grading.grade("stub", {})
    outputs = grading.test_cell_outputs("stub")
    text = {gid: " ".join("".join(o.get("text", "") + "".join(o.get("traceback", [])) for o in cell).split())
            for gid, cell in outputs.items()}   # the feedback's lines are wrapped: compared with one space
    assert not any(stderr_text(cell) for cell in outputs.values())
    assert "misaligned" in text["copy_score"].lower() and "your_kernel.cu:7" in text["copy_score"], text["copy_score"]
    assert "NaN" in text["softmax_score"] and "did not finish within" in text["chunked_score"]
    assert "racecheck" in text["reduce_score"] or "row sums wrong" in text["reduce_score"], text["reduce_score"]
    write_gpu_record("debugging-nbgrader-gpu", "nbgrader autograde of the debugging track: reference and stub",
                     {"seconds_per_submission": grading.seconds, "scores": grading.scores}, dists=("nbgrader",),
                     folder="debugging")
