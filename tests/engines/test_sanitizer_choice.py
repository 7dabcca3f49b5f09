"""Which compute-sanitizer tools a CUDA kernel is checked with, and where: a spec's ``sanitizer_tools`` (any of
memcheck, racecheck, initcheck, synccheck; the first three by default) and ``sanitize_shape`` (else the smallest check
shape of two blocks or more), each read from the spec at its edges and handed to the sanitizer as read; a crash
explained where the spec says ``explain_crash``: memcheck's report of the faulting access at the shape it crashed at;
and the tools' runs prepared before a submission's kernels are timed, standing in for the runs of the same launch."""
from __future__ import annotations

import dataclasses
import threading

import pytest
from test_cuda_spec_rules import K1, TOP, error, spec_with
from test_grade_rules import ok_result

from graders.cuda_engine import coredump_child, grade, sanitizer
from graders.cuda_engine.spec import DEFAULT_SANITIZER_TOOLS, SANITIZER_TOOLS
from graders.hidden_tests import preparation
from graders.result import GradeResult, Status
from graders.sandbox.run import ChildResult


def test_by_default_three_tools_at_the_smallest_check_shape_of_two_blocks():
    kernel = spec_with(top={"check_shapes": [[4, 4], [33, 65], [64, 64]]}).kernel("k")
    assert kernel.sanitizer_tools == DEFAULT_SANITIZER_TOOLS == ("memcheck", "racecheck", "initcheck")
    assert kernel.sanitize_shape is None
    assert sanitizer.sanitize_shape(kernel, kernel.geometry) == sanitizer.public_shape(kernel, kernel.geometry) == (33, 65)


def test_the_tools_are_inherited_from_the_assignment_and_kept_in_the_tools_order():
    spec = spec_with(top={"sanitizer_tools": ["synccheck", "memcheck"]})
    assert spec.kernel("k").sanitizer_tools == ("memcheck", "synccheck")
    assert spec_with(kernel={"sanitizer_tools": list(SANITIZER_TOOLS)}).kernel("k").sanitizer_tools == SANITIZER_TOOLS
    assert spec_with(kernel={"sanitizer_tools": []}).kernel("k").sanitizer_tools == ()


@pytest.mark.parametrize("tools", [["memcheck", "memcheck"], ["leakcheck"], "memcheck", [1]])
def test_a_tool_list_that_is_not_distinct_known_tools_is_refused(tools):
    allowed = "['memcheck', 'racecheck', 'initcheck', 'synccheck']"
    assert error(kernel={"sanitizer_tools": tools}) == (
        f"{K1}: sanitizer_tools must be a list of distinct tools among {allowed}, got {tools!r}")


def test_a_sanitize_shape_is_a_shape_of_the_kinds_rank_and_the_sanitizer_runs_there():
    kernel = spec_with(kernel={"sanitize_shape": [100, 3]}).kernel("k")
    assert sanitizer.sanitize_shape(kernel, kernel.geometry) == (100, 3)
    assert sanitizer.public_shape(kernel, kernel.geometry) == (4, 4)   # the only check shape: one block
    assert error(kernel={"sanitize_shape": [100]}) == f"{K1} sanitize_shape: expected a list of 2 positive ints, got [100]"
    assert "unknown key(s) ['sanitize_shape']" in error(top={"sanitize_shape": [4, 4]})
    assert TOP in error(top={"sanitize_shape": [4, 4]})


@pytest.mark.parametrize("shared_bytes, expected", [(0, ("memcheck", "synccheck")),
                                                     (1024, ("memcheck", "racecheck", "synccheck"))])
def test_the_grader_hands_the_specs_tools_to_the_sanitizer_racecheck_only_with_shared_memory(
        monkeypatch, shared_bytes, expected):
    kernel = spec_with(kernel={"sanitizer_tools": ["memcheck", "racecheck", "synccheck"]}).kernel("k")
    calls = []
    checked = {"shape": [4, 4], "tools": {}, "failure": ""}
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args: calls.append(args) or checked)
    found = ok_result({"compile": {"resources": {"k_fn": {"shared_bytes": shared_bytes}}}})
    grade.sanitized(found, kernel, {"source": "s"}, kernel.geometry)
    assert calls == [({"source": "s"}, kernel, kernel.geometry, grade._child_env(), expected)]


SYNCCHECK = """========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at chunked_sum+0x2b0
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""


def test_synccheck_reports_are_read_in_its_own_words():
    assert sanitizer.findings("synccheck", SYNCCHECK) == (
        "compute-sanitizer --tool synccheck found 1 error(s); the first: Barrier error detected. Divergent thread(s) "
        "in block")


# --- a crash explained: memcheck's report of the faulting access, where the spec asks -------------------------

MISALIGNED = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at copy_rows+0x1c0 in your_kernel.cu:7
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f4c2e0013ec is misaligned
=========     and is inside the nearest allocation at 0x7f4c2e000000 of size 4,004 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f2e4f] in libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
"""
CRASHED = "CUDA error while checking correctness: CUDA_ERROR_MISALIGNED_ADDRESS: load or store on a misaligned address"


def test_the_first_block_of_a_memcheck_report_is_the_access_where_it_is_and_the_address_without_the_backtrace():
    assert sanitizer.first_block(MISALIGNED) == [
        "Invalid __global__ read of size 16 bytes", "at copy_rows+0x1c0 in your_kernel.cu:7",
        "by thread (0,0,0) in block (1,0,0)", "Address 0x7f4c2e0013ec is misaligned",
        "and is inside the nearest allocation at 0x7f4c2e000000 of size 4,004 bytes"]
    assert sanitizer.first_block("========= ERROR SUMMARY: 0 errors\n") == []


def crashed(checks, **details) -> GradeResult:
    return GradeResult("k", Status.CRASHED, CRASHED, max_points=3.0, target="gpu",
                       details={"score": {}, "checks": checks} | details)


def test_the_crash_shape_is_the_check_shape_after_those_passed_and_none_outside_the_checks():
    kernel = spec_with(top={"check_shapes": [[4, 4], [33, 65], [64, 64]]}).kernel("k")
    assert grade.crash_shape(crashed([{"ok": True}]), kernel) == (33, 65)
    assert grade.crash_shape(crashed([]), kernel) == (4, 4)
    assert grade.crash_shape(crashed([{}] * 3, timing={}), kernel) is None        # after timing: the re-check
    elsewhere = dataclasses.replace(crashed([]), message="CUDA error while timing: CUDA_ERROR_MISALIGNED_ADDRESS")
    assert grade.crash_shape(elsewhere, kernel) is None


CUDA_GDB = """Opening GPU coredump: /tmp/your_kernel.cudacore
[Current focus set to CUDA kernel 0, grid 1, block (1,0,0), thread (0,0,0), device 0, sm 0, warp 0, lane 0]

CUDA Exception: Warp Misaligned Address
The exception was triggered at PC 0x7fffd3a0f1c0  copy_rows  (your_kernel.cu:7)
#0  copy_rows<<<(5,1,1),(256,1,1)>>> (out=0x7fffc2000000, in=0x7fffc1000000, rows=5, cols=1001) at your_kernel.cu:7
7	    for (int i = threadIdx.x; i < vectors; i += BLOCK_X) dst[i] = src[i];
"""


def test_cuda_gdbs_words_on_a_core_dump_are_the_exception_its_pc_and_line_and_the_frame_with_its_source():
    assert coredump_child.exception_lines(CUDA_GDB + CUDA_GDB) == [
        "CUDA Exception: Warp Misaligned Address",
        "The exception was triggered at PC 0x7fffd3a0f1c0  copy_rows  (your_kernel.cu:7)",
        "#0  copy_rows<<<(5,1,1),(256,1,1)>>> (out=0x7fffc2000000, in=0x7fffc1000000, rows=5, cols=1001) at "
        "your_kernel.cu:7",
        "7      for (int i = threadIdx.x; i < vectors; i += BLOCK_X) dst[i] = src[i];"]
    assert coredump_child.exception_lines("Opening GPU coredump: x\nNo CUDA exception\n") == []


def test_the_frame_names_the_cells_file_without_the_directory_it_was_compiled_in():
    # as cuda-gdb printed it on the H200, the sandbox's /tmp being where NVRTC compiled the cell
    frame = "#0  0x00007fe2337a48d0 in copy_rows<<<(5,1,1),(256,1,1)>>> () at /tmp/your_kernel.cu:7"
    assert coredump_child.exception_lines(frame + "\n7\t    dst[i] = src[i];\n") == [
        "#0  0x00007fe2337a48d0 in copy_rows<<<(5,1,1),(256,1,1)>>> () at your_kernel.cu:7", "7      dst[i] = src[i];"]


@pytest.mark.parametrize("dump", [ChildResult("ok", answer={"lines": ["CUDA Exception: Warp Misaligned Address"],
                                                            "why": ""}),
                                  ChildResult("ok", answer={"lines": [], "why": "no cuda-gdb on this GPU worker"}),
                                  ChildResult("crashed", message="exit status 134")])
def test_a_crash_explained_adds_memchecks_block_and_the_core_dumps_lines_to_the_message(monkeypatch, dump):
    kernel = spec_with(top={"check_shapes": [[4, 4], [33, 65]]}, kernel={"explain_crash": True}).kernel("k")
    runs = []

    def tool_run(handler, request, **options):
        runs.append((handler, request, options))
        return ChildResult("ok", answer={"error": "CUDA_ERROR_MISALIGNED_ADDRESS"}, stdout=MISALIGNED)

    def dump_run(handler, request, **options):
        runs.append((handler, request, options))
        return dump

    monkeypatch.setattr(sanitizer, "run_child", tool_run)
    monkeypatch.setattr(grade, "run_child", dump_run)
    monkeypatch.setattr(sanitizer, "tool_binary", lambda: "/cuda/bin/compute-sanitizer")
    result = grade.explained(crashed([{"ok": True}]), kernel, {"source": "s", "kernel_id": "k"})
    (handler, request, options), (dump_handler, dump_request, dump_options) = runs
    assert handler == sanitizer.CHILD and request == {"source": "s", "kernel_id": "k", "shape": [33, 65],
                                                      "lineinfo": True}
    assert options["wrapper"][:3] == ("/cuda/bin/compute-sanitizer", "--tool", "memcheck") and options["gpu"]
    assert dump_handler == grade.COREDUMP_CHILD and dump_request == {"source": "s", "kernel_id": "k",
                                                                     "shape": [33, 65]}
    assert dump_options["env"]["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] == "1" and "wrapper" not in dump_options
    memcheck = ["compute-sanitizer --tool memcheck, one launch at shape 33x65:",
                "  Invalid __global__ read of size 16 bytes", "  at copy_rows+0x1c0 in your_kernel.cu:7",
                "  by thread (0,0,0) in block (1,0,0)", "  Address 0x7f4c2e0013ec is misaligned",
                "  and is inside the nearest allocation at 0x7f4c2e000000 of size 4,004 bytes"]
    dumped = (["the CUDA core dump of one launch at shape 33x65, read with cuda-gdb:",
               "  CUDA Exception: Warp Misaligned Address"] if dump.answer.get("lines") else [])
    assert result.status == Status.CRASHED and result.message.splitlines() == [CRASHED, *memcheck, *dumped]
    report = result.details["crash_report"]
    assert report["shape"] == [33, 65] and report["core_dump_missing"] == (
        "" if dumped else dump.answer.get("why") or "its child crashed: exit status 134")


def test_a_crash_is_explained_only_where_the_spec_asks():
    assert spec_with().kernel("k").explain_crash is False
    assert error(kernel={"explain_crash": "yes"}) == f"{K1}: 'explain_crash' must be a bool, got 'yes'"
    assert "unknown key(s) ['explain_crash']" in error(top={"explain_crash": True})


def test_line_information_is_compiled_in_only_when_asked():
    from graders.cuda_engine.compile import CELL_NAME, compile_cuda
    source = 'extern "C" __global__ void k_fn(float* out) { out[threadIdx.x] = 1.0f; }\n'
    plain, lines = (compile_cuda(source, kernels=("k_fn",), lineinfo=asked).cubin for asked in (False, True))
    assert b".debug_line" in lines and CELL_NAME.encode() in lines
    assert b".debug_line" not in plain


# --- the sanitizer's runs prepared before a submission's kernels are timed --------------------------------------

RACE = "compute-sanitizer --tool racecheck found 2 error(s); the first: Race reported between Write access ..."


def prepared_value(kernel, launch, tools: dict[str, str]) -> dict:
    return {"launch": launch, "seconds": 3.0,
            "checked": {"shape": [33, 65], "tools": tools, "failure": next((f for f in tools.values() if f), ""),
                        "seconds": {tool: 3.0 for tool in tools}}}


def test_a_preparations_findings_of_the_same_launch_stand_in_for_the_tools_runs(monkeypatch):
    """`score`'s preparation (`grade.prepare`) ran every tool of the spec before any kernel was timed; the
    timed test takes the findings of the tools it runs from it (racecheck's too, for a kernel with shared memory)."""
    kernel = spec_with(kernel={"sanitizer_tools": ["memcheck", "racecheck", "synccheck"]}).kernel("k")
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args: pytest.fail("the tools ran again"))
    request = {"spec_path": "/course/spec.toml", "kernel_id": "k", "source": "s"}
    value = prepared_value(kernel, ("/course/spec.toml", "k", "s", kernel.geometry),
                           {"memcheck": "", "racecheck": RACE, "synccheck": ""})
    with_shared = ok_result({"compile": {"resources": {"k_fn": {"shared_bytes": 1024}}}})
    with preparation(value):
        found = grade.sanitized(with_shared, kernel, request, kernel.geometry)
        clean = grade.sanitized(ok_result({"compile": {"resources": {"k_fn": {"shared_bytes": 0}}}}), kernel,
                                request, kernel.geometry)
    assert found.status == Status.INCORRECT and RACE in found.message and found.points == 0
    assert found.details["sanitizer"]["prepared"] and found.details["sanitizer"]["tools"]["racecheck"] == RACE
    assert clean.status == Status.OK and set(clean.details["sanitizer"]["tools"]) == {"memcheck", "synccheck"}


@pytest.mark.parametrize("change", ["source", "geometry", "tool"])
def test_a_preparation_of_another_launch_or_without_a_tool_leaves_the_runs_to_the_test(monkeypatch, change):
    kernel = spec_with(kernel={"sanitizer_tools": ["memcheck", "synccheck"]}).kernel("k")
    calls = []
    monkeypatch.setattr(grade.sanitizer, "sanitize",
                        lambda *args: calls.append(args) or {"shape": [33, 65], "tools": {}, "failure": ""})
    request = {"spec_path": "/course/spec.toml", "kernel_id": "k", "source": "s"}
    geometry = dataclasses.replace(kernel.geometry, block=(64, 1)) if change == "geometry" else kernel.geometry
    launch = ("/course/spec.toml", "k", "another source" if change == "source" else "s", geometry)
    tools = {"memcheck": ""} if change == "tool" else {"memcheck": "", "synccheck": ""}
    with preparation(prepared_value(kernel, launch, tools)):
        grade.sanitized(ok_result(), kernel, request, kernel.geometry)
    assert len(calls) == 1


def test_the_preparation_runs_every_tool_of_the_spec_on_the_launch_the_test_grades(monkeypatch):
    calls, timeouts = [], []
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args, timeout_s: calls.append(args) or timeouts.append(
        timeout_s) or {"shape": [1], "tools": {"memcheck": ""}, "failure": "", "seconds": {"memcheck": 1.0}})
    kernel = grade.load_spec("vecadd").kernel("add")
    value = grade.prepare("vecadd", "add", "the source")
    (request, sanitized_kernel, geometry, _, tools), = calls
    assert (sanitized_kernel, geometry, tools) == (kernel, kernel.geometry, kernel.sanitizer_tools)
    assert timeouts == [grade.PREPARE_TIMEOUT_S] < [sanitizer.TIMEOUT_S]
    assert value["launch"] == grade._prepared_launch(request, kernel.geometry) == (
        str(kernel_spec_path("vecadd")), "add", "the source", kernel.geometry)
    assert grade.prepare("vecadd", "add", "the source", sanitize=False) is None
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    assert grade.prepare("vecadd", "add", "the source") is None and len(calls) == 1


def kernel_spec_path(track: str):
    return grade.load_spec(track).path.resolve()


# --- a submission's preparations together ---------------------------------------------------------------------

@pytest.fixture
def clean_children(monkeypatch, tmp_path):
    """compute-sanitizer named by WORKSHOP_COMPUTE_SANITIZER, every child run recorded and answered clean (a batch
    racecheck run on transpose_tiled, or its run alone, reports a race), and ncu's counts stood in for."""
    binary = tmp_path / "compute-sanitizer"
    binary.write_text("")
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", str(binary))
    runs, counted = [], []

    def child(handler, request, **options):
        runs.append((options["wrapper"][2], [r["kernel_id"] for r in request.get("launches", [request])]))
        racy = options["wrapper"][2] == "racecheck" and "tiled" in runs[-1][1]
        answer = ({"launches": [{"launched": r["shape"]} for r in request["launches"]]} if "launches" in request
                  else {"launched": request["shape"]})
        return ChildResult("ok", answer=answer, stdout=RACE_REPORT if racy else CLEAN_REPORT)
    monkeypatch.setattr(sanitizer, "run_child", child)
    monkeypatch.setattr(grade.counters, "measure", lambda spec, kernel, request, env, timeout_s: counted.append(
        kernel.id) or {"yours": 1, "failure": ""})
    return runs, counted


CLEAN_REPORT = "========= ERROR SUMMARY: 0 errors\n"
RACE_REPORT = ("========= Error: Race reported between Write access at transpose_tiled+0x150\n"
               "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")


def test_preparations_together_give_each_call_what_its_own_preparation_gives(clean_children):
    """The same values as `grade.prepare` call by call (the launch, the findings, the counts of the padded
    transpose's counter rule), from one child per tool; a racy kernel's finding is its own, and it is not counted."""
    runs, counted = clean_children
    calls = [(("transpose", kernel_id, f"{kernel_id} source"), {"budget_s": 1.0}) for kernel_id in
             ("naive", "tiled", "padded")]
    together = grade.prepare_together(calls)
    assert sorted(runs) == sorted([(tool, ["naive", "tiled", "padded"]) for tool in sanitizer.TOOLS]
                                  + [("racecheck", [kernel_id]) for kernel_id in ("naive", "tiled", "padded")])
    assert counted == ["padded"]
    runs.clear()
    counted.clear()
    alone = [grade.prepare(*args, **kwargs) for args, kwargs in calls]
    assert len(runs) == 9 and counted == ["padded"]
    for mine, own in zip(together, alone):
        assert (mine["launch"], mine["counter"]) == (own["launch"], own["counter"])
        assert {k: v for k, v in mine["checked"].items() if k not in ("seconds", "batched")} == {
            k: v for k, v in own["checked"].items() if k != "seconds"}
    assert together[1]["checked"]["failure"].startswith("compute-sanitizer --tool racecheck found 1 error(s)")
    assert [value["checked"]["batched"] for value in together] == [{"memcheck": 3, "initcheck": 3}] * 3


def test_a_call_whose_preparation_fails_gets_that_failure_and_the_others_are_prepared(clean_children, monkeypatch):
    runs, _ = clean_children
    failed, naive, off = grade.prepare_together([(("transpose", "nonexistent", "s"), {}),
                                                 (("transpose", "naive", "s"), {}),
                                                 (("transpose", "tiled", "s"), {"sanitize": False})])
    assert isinstance(failed, Exception) and naive["checked"]["failure"] == "" and off is None
    assert all(kernels == ["naive"] for _, kernels in runs)
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    runs.clear()
    naive, padded = grade.prepare_together([(("transpose", "naive", "s"), {}), (("transpose", "padded", "s"), {})])
    assert naive is None and padded["checked"] is None and padded["counter"] == {"yours": 1, "failure": ""}
    assert runs == []


def test_the_counts_are_made_beside_the_sanitizer_and_kept_only_for_a_kernel_without_a_finding(monkeypatch):
    """The count of a kernel with a counter rule starts while the sanitizer's batches still run (they wait for it
    here, so that the preparation cannot end unless it does); a kernel with a finding keeps no count."""
    counting, finding = threading.Event(), []
    monkeypatch.setattr(grade.counters, "measure", lambda *a, **k: counting.set() or {"yours": 1, "failure": ""})

    def sanitize_together(launches, env, timeout_s):
        assert counting.wait(10), "no count began while the sanitizer ran"
        return [{"failure": finding[0] if finding else ""} for _ in launches]
    monkeypatch.setattr(grade.sanitizer, "sanitize_together", sanitize_together)
    padded, = grade.prepare_together([(("transpose", "padded", "s"), {})])
    assert padded["counter"] == {"yours": 1, "failure": ""}
    counting.clear()
    finding.append("compute-sanitizer --tool racecheck found 1 error(s)")
    padded, = grade.prepare_together([(("transpose", "padded", "s"), {})])
    assert padded["counter"] is None and padded["checked"]["failure"] == finding[0]


def test_the_registered_handler_hands_over_only_written_kernels(monkeypatch):
    """`score`'s together-handler as registered: a call whose kernel is still the stub is not prepared."""
    from graders.hidden_tests import PREPARE_TOGETHER, STUB_MARK
    handed = []
    monkeypatch.setattr(grade.sanitizer, "sanitize_together", lambda launches, env, timeout_s: handed.append(
        [request["kernel_id"] for request, _, _ in launches]) or [{"failure": ""} for _ in launches])
    monkeypatch.setattr(grade.counters, "measure", lambda *a, **k: {"failure": ""})
    stub = f'extern "C" __global__ void transpose_tiled(float* out)\n{{\n    {STUB_MARK}\n}}\n'
    values = PREPARE_TOGETHER["score"]([(("transpose", "naive", "s"), {}), (("transpose", "tiled", stub), {}),
                                        (("transpose", "padded", "s"), {})])
    assert handed == [["naive", "padded"]] and values[1] is None
    assert [value["checked"] for value in (values[0], values[2])] == [{"failure": ""}] * 2
