"""compute-sanitizer as a grader, on a machine without a GPU: its reports read, the shape it runs at, the
child run under it, and what a finding does to a kernel's result. (Its real runs are in tests/gpu.)"""
from __future__ import annotations

import dataclasses
import threading
import time
import types

import pytest

from graders.cuda_engine import grade, sanitizer
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.gpu import NeedsGPUWorker
from graders.result import GradeResult, Status
from graders.sandbox import capped_output
from graders.sandbox.run import ChildResult, run_child

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at transpose_naive+0x1a0
=========     by thread (0,0,0) in block (3,0,0)
=========     Address 0x7f0000001000 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""
RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at transpose_tiled+0x150
=========     and Read access at transpose_tiled+0x1b0 [512 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
RACE_WARNING_ONLY = """========= COMPUTE-SANITIZER
========= Warning: Race reported between Read access at k+0x10
=========     and Write access at k+0x20 [1 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
"""
INITCHECK = """========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at sgemm_smem+0x2f0
=========
========= ERROR SUMMARY: 1 error
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


@pytest.mark.parametrize("tool, report, expected", [
    ("memcheck", MEMCHECK, "compute-sanitizer --tool memcheck found 2 error(s); the first: Invalid __global__ "
                           "write of size 4 bytes"),
    ("racecheck", RACECHECK, "compute-sanitizer --tool racecheck found 1 error(s); the first: Error: Race "
                             "reported between Write access at transpose_tiled+0x150"),
    ("initcheck", INITCHECK, "compute-sanitizer --tool initcheck found 1 error(s); the first: Uninitialized "
                             "__global__ memory read of size 4 bytes"),
    ("racecheck", RACE_WARNING_ONLY, ""),
    ("memcheck", CLEAN, ""),
    ("memcheck", "========= ERROR SUMMARY: 0 errors\n" + MEMCHECK, "compute-sanitizer --tool memcheck found 2 "
                 "error(s); the first: Invalid __global__ write of size 4 bytes"),   # a kernel's printf posing
])
def test_a_report_is_read_in_the_tools_own_words(tool, report, expected):
    assert sanitizer.findings(tool, report) == expected


@pytest.mark.parametrize("report", ["", "========= COMPUTE-SANITIZER\n", "ERROR SUMMARY: 0 errors\n"])
def test_a_report_without_the_tools_summary_fails_the_grader_not_passes_the_kernel(report):
    with pytest.raises(sanitizer.SanitizerFailed, match="printed no summary"):
        sanitizer.findings("memcheck", report)


@pytest.mark.parametrize("track, kernel_id, shape", [
    ("transpose", "padded", (33, 65)),            # (1, 1) is one block
    ("gemm", "coalesced", (33, 65, 17)),
    ("gemm", "warptiling", (256, 512, 96)),       # its own check shapes; 128 x 256 fits one 128 x 256 tile
    ("vecadd", "add", (257,)),                    # 1, 255 and 256 fit one block of 256
])
def test_the_sanitizer_runs_at_the_smallest_check_shape_of_two_blocks_or_more(track, kernel_id, shape):
    kernel = load_spec(track).kernel(kernel_id)
    assert sanitizer.sanitize_shape(kernel, resolve_geometry(kernel, None, None, None)) == shape


def test_a_child_runs_under_its_wrapper_and_its_output_comes_back(fake_env):
    result = run_child("fake_perf_child", {"mode": "wrapped"}, timeout_s=60, env=fake_env,
                       wrapper=("/usr/bin/env", "WRAPPED=yes"))
    assert result.ok and result.answer == {"wrapped": "yes"}
    assert "a line from inside the wrapper" in result.stdout


@pytest.fixture
def padded():
    spec = load_spec("transpose")
    kernel = spec.kernel("padded")
    return kernel, resolve_geometry(kernel, None, None, None)


def test_each_tool_runs_the_kernel_once_under_compute_sanitizer(monkeypatch, padded, tmp_path):
    kernel, geometry = padded
    tool_binary = tmp_path / "compute-sanitizer"
    tool_binary.write_text("")
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", str(tool_binary))
    runs = []

    def child(handler, request, **options):
        runs.append((handler, request["shape"], options["wrapper"], options["gpu"]))
        return ChildResult("ok", answer={"launched": request["shape"]},
                           stdout=RACECHECK if "racecheck" in options["wrapper"] else CLEAN)
    monkeypatch.setattr(sanitizer, "run_child", child)
    checked = sanitizer.sanitize({"kernel_id": "padded"}, kernel, geometry, {})
    assert sorted(r[2][:3] for r in runs) == sorted((str(tool_binary), "--tool", t) for t in sanitizer.TOOLS)
    assert all(r[0] == sanitizer.CHILD and r[1] == [33, 65] and r[3] for r in runs)
    watched = {r[2][2]: r[2][3:] for r in runs}
    assert watched["memcheck"][:2] == watched["racecheck"][:2] == ("--kernel-name", "kns=transpose_padded")
    assert "--kernel-name" not in watched["initcheck"]   # it must see the grader's kernels write the inputs
    assert all(("--report-api-errors", "no") == options[i:i + 2] for options in watched.values()
               for i in [options.index("--report-api-errors")])
    assert checked["shape"] == [33, 65] and checked["tools"]["memcheck"] == ""
    assert checked["failure"].startswith("compute-sanitizer --tool racecheck found 1 error(s)")


def test_a_tool_run_that_does_not_finish_is_the_graders_failure(monkeypatch, padded, tmp_path):
    kernel, geometry = padded
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/bin/true")
    monkeypatch.setattr(sanitizer, "run_child", lambda *a, **k: ChildResult("crashed", message="killed"))
    with pytest.raises(sanitizer.SanitizerFailed, match="did not finish"):
        sanitizer.sanitize({}, kernel, geometry, {})


def test_a_gpu_worker_without_compute_sanitizer_stops_grading(monkeypatch, padded):
    kernel, geometry = padded
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    with pytest.raises(NeedsGPUWorker, match="compute-sanitizer was not found"):
        sanitizer.sanitize({}, kernel, geometry, {})


def ok_result(shared_bytes: int | None) -> GradeResult:
    resources = {"transpose_padded": {"shared_bytes": shared_bytes}}
    return GradeResult("padded", Status.OK, points=3.0, max_points=3.0, target="gpu",
                       details={"compile": {"resources": resources}, "score": {"total": 3.0}})


@pytest.mark.parametrize("shared_bytes, tools", [(4224, sanitizer.TOOLS), (None, sanitizer.TOOLS),
                                                  (0, ("memcheck", "initcheck"))])
def test_racecheck_runs_for_kernels_that_use_shared_memory(monkeypatch, padded, shared_bytes, tools):
    kernel, geometry = padded
    asked = []
    monkeypatch.setattr(sanitizer, "sanitize", lambda request, k, g, env, t: asked.append(t) or
                        {"shape": [33, 65], "tools": dict.fromkeys(t, ""), "failure": ""})
    result = grade.sanitized(ok_result(shared_bytes), kernel, {}, geometry)
    assert asked == [tools] and result.ok and result.points == 3.0
    assert result.details["sanitizer"]["failure"] == ""


def test_a_finding_takes_the_kernels_points_with_the_tools_line(monkeypatch, padded):
    kernel, geometry = padded
    line = sanitizer.findings("racecheck", RACECHECK)
    monkeypatch.setattr(sanitizer, "sanitize", lambda *a: {"shape": [33, 65], "tools": {"racecheck": line},
                                                           "failure": line})
    result = grade.sanitized(ok_result(4224), kernel, {}, geometry)
    assert result.status == Status.INCORRECT and result.points == 0 and result.message == line
    assert result.details["score"]["total"] == 0 and result.failure_line().startswith("incorrect")


def test_a_sanitizer_that_breaks_is_a_grader_error(monkeypatch, padded):
    kernel, geometry = padded

    def broken(*args):
        raise sanitizer.SanitizerFailed("compute-sanitizer --tool memcheck did not finish")
    monkeypatch.setattr(sanitizer, "sanitize", broken)
    result = grade.sanitized(ok_result(4224), kernel, {}, geometry)
    assert result.status == Status.GRADER_ERROR and "did not finish" in result.message and result.points == 0


# --- each rule of the report reader and the tool's run at its edge -------------------------------------

@pytest.mark.parametrize("finding", ["Invalid __shared__ read of size 4 bytes",
                                     "Out of bounds access of size 16 bytes",
                                     "Misaligned address for __global__ read of size 8 bytes",
                                     "Barrier error detected. Divergent thread(s) in block",
                                     "Error: Race reported between Write access at k+0x10",
                                     "Race reported between Read access at k+0x30"])
def test_every_kind_of_finding_is_quoted_from_the_tools_own_line(finding):
    report = (f"========= COMPUTE-SANITIZER\n==== {finding}  \n=========     at k+0x10\n"
              "========= ERROR SUMMARY: 3 errors\n")
    assert sanitizer.findings("memcheck", report) == (
        f"compute-sanitizer --tool memcheck found 3 error(s); the first: {finding}")


def test_a_counted_error_without_a_line_the_grader_knows_points_to_the_report():
    report = "========= Some new kind of hazard\n========= ERROR SUMMARY: 1 error\n"
    assert sanitizer.findings("initcheck", report) == (
        "compute-sanitizer --tool initcheck found 1 error(s); the first: see the sanitizer's report")


def test_only_a_line_that_starts_with_the_tools_prefix_is_a_finding_or_a_summary():
    report = ("printed by the kernel: Invalid value 3\n========= Uninitialized __global__ memory read\n"
              "  ERROR SUMMARY: 9 errors\n========= ERROR SUMMARY: 1 error\n")
    assert sanitizer.findings("initcheck", report) == (
        "compute-sanitizer --tool initcheck found 1 error(s); the first: Uninitialized __global__ memory read")


@pytest.mark.parametrize("summary, count", [("1 hazard displayed (1 error, 0 warnings)", 1),
                                            ("7 hazards displayed (12 errors, 3 warnings)", 12),
                                            ("7 hazards displayed (0 errors, 7 warnings)", 0)])
def test_racecheck_counts_its_errors_not_its_hazards_or_warnings(summary, count):
    report = f"========= Error: Race reported between Write access at k\n========= RACECHECK SUMMARY: {summary}\n"
    expected = (f"compute-sanitizer --tool racecheck found {count} error(s); the first: Error: Race reported "
                "between Write access at k") if count else ""
    assert sanitizer.findings("racecheck", report) == expected


def test_the_largest_count_is_taken_so_printed_text_cannot_lower_it():
    report = ("========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 5 errors\n"
              "========= ERROR SUMMARY: 2 errors\n========= RACECHECK SUMMARY: 1 hazard displayed (3 errors, 0 "
              "warnings)\n")
    assert sanitizer.findings("memcheck", report).startswith("compute-sanitizer --tool memcheck found 5 error(s)")


def test_a_report_without_a_summary_is_quoted_by_its_last_500_characters():
    report = "x" * 100 + "y" * 500
    with pytest.raises(sanitizer.SanitizerFailed) as info:
        sanitizer.findings("racecheck", report)
    assert str(info.value) == f"compute-sanitizer --tool racecheck printed no summary: {'y' * 500!r}"


def test_a_kernel_whose_every_check_shape_is_one_block_runs_at_its_largest(padded):
    kernel, geometry = padded
    one_block = dataclasses.replace(kernel, check_shapes=((1, 1), (32, 32), (8, 3)))
    assert sanitizer.sanitize_shape(one_block, geometry) == (32, 32)
    two = dataclasses.replace(kernel, check_shapes=((64, 64), (1, 1), (32, 33), (33, 32)))
    assert sanitizer.sanitize_shape(two, geometry) == (32, 33)   # 1056 elements, before 33 x 32 and 64 x 64


@pytest.fixture
def tool(monkeypatch, tmp_path):
    """A compute-sanitizer file named by WORKSHOP_COMPUTE_SANITIZER and a recorder of the child runs."""
    binary = tmp_path / "compute-sanitizer"
    binary.write_text("")
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", str(binary))
    runs, answers, by_tool, lock = [], [], {}, threading.Lock()

    def child(handler, request, **options):   # the tools' children run side by side: answer by tool if told
        with lock:
            runs.append({"handler": handler, "request": request, **options})
            name = options["wrapper"][2]
            if name in by_tool:
                return by_tool[name]
            return answers.pop(0) if answers else ChildResult("ok", answer={}, stdout=CLEAN)
    monkeypatch.setattr(sanitizer, "run_child", child)
    return types.SimpleNamespace(binary=binary, runs=runs, answers=answers, by_tool=by_tool)


def test_the_tools_whole_command_line_limit_and_environment(tool):
    env = {"PYTHONPATH": "/somewhere"}
    assert sanitizer.run_tool("memcheck", "some.child", {"seed": 3}, env, "transpose_padded") == ""
    assert sanitizer.run_tool("initcheck", "some.child", {"seed": 3}, env, "transpose_padded") == ""
    assert sanitizer.run_tool("racecheck", "some.child", {"seed": 3}, env) == ""
    one, five = (("--report-api-errors", "no", "--print-limit", n, "--error-exitcode", "0") for n in ("1", "5"))
    assert [run["wrapper"] for run in tool.runs] == [
        (str(tool.binary), "--tool", "memcheck", "--kernel-name", "kns=transpose_padded", *one),
        (str(tool.binary), "--tool", "initcheck", *one),
        (str(tool.binary), "--tool", "racecheck", *five)]
    for run in tool.runs:
        assert run == {"handler": "some.child", "request": {"seed": 3}, "timeout_s": sanitizer.TIMEOUT_S,
                       "gpu": True, "wrapper": run["wrapper"], "env": env}
    assert sanitizer.TIMEOUT_S == 180.0


def test_a_tool_run_that_did_not_finish_names_its_status_message_and_output(tool):
    tool.answers.append(ChildResult("timeout", message="past 180 s", stdout="a" * 10 + "b" * 500))
    with pytest.raises(sanitizer.SanitizerFailed) as info:
        sanitizer.run_tool("memcheck", "c", {}, {}, "k")
    assert str(info.value) == f"compute-sanitizer --tool memcheck did not finish (timeout: past 180 s) {'b' * 500}"


def test_a_child_that_answers_an_error_under_the_tool_is_the_graders_failure(tool):
    tool.answers.append(ChildResult("ok", answer={"error": "no kernel k"}, stdout=CLEAN))
    with pytest.raises(sanitizer.SanitizerFailed) as info:
        sanitizer.run_tool("racecheck", "c", {}, {}, "k")
    assert str(info.value) == f"compute-sanitizer --tool racecheck did not finish (ok: no kernel k) {CLEAN}"
    tool.answers.append(ChildResult("crashed", answer={}, stdout=""))
    with pytest.raises(sanitizer.SanitizerFailed) as info:
        sanitizer.run_tool("racecheck", "c", {}, {}, "k")
    assert str(info.value) == "compute-sanitizer --tool racecheck did not finish (crashed: ) "


def test_sanitize_runs_the_tools_asked_for_and_reports_the_first_finding_in_their_order(tool, padded):
    kernel, geometry = padded
    tool.by_tool.update(racecheck=ChildResult("ok", stdout=CLEAN), initcheck=ChildResult("ok", stdout=INITCHECK),
                        memcheck=ChildResult("ok", stdout=MEMCHECK))
    checked = sanitizer.sanitize({"seed": 5, "shape": [1, 1]}, kernel, geometry, {}, ("racecheck", "initcheck",
                                                                                       "memcheck"))
    assert sorted(run["wrapper"][2] for run in tool.runs) == ["initcheck", "memcheck", "racecheck"]
    assert list(checked["tools"]) == ["racecheck", "initcheck", "memcheck"]
    assert all(run["request"] == {"seed": 5, "shape": [33, 65]} and run["handler"] == sanitizer.CHILD
               for run in tool.runs)
    seconds = checked.pop("seconds")
    assert checked == {"shape": [33, 65], "tools": {"racecheck": "", "initcheck": sanitizer.findings(
        "initcheck", INITCHECK), "memcheck": sanitizer.findings("memcheck", MEMCHECK)},
        "failure": sanitizer.findings("initcheck", INITCHECK)}
    assert list(seconds) == ["racecheck", "initcheck", "memcheck"] and all(s >= 0 for s in seconds.values())
    assert sanitizer.CHILD == "graders.cuda_engine.launch_child" and sanitizer.TOOLS == (
        "memcheck", "racecheck", "initcheck")


def test_without_compute_sanitizer_grading_stops_before_any_run(monkeypatch, padded):
    kernel, geometry = padded
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    monkeypatch.setattr(sanitizer, "run_child", lambda *a, **k: pytest.fail("a child ran"))
    with pytest.raises(sanitizer.SanitizerMissing) as info:
        sanitizer.sanitize({}, kernel, geometry, {}, ())
    assert str(info.value) == (
        "compute-sanitizer was not found on this GPU worker: install the CUDA toolkit's compute-sanitizer or set "
        "WORKSHOP_COMPUTE_SANITIZER (WORKSHOP_SANITIZE=off skips it, for trusted local use only)")


def test_a_clean_kernel_has_no_failure_and_every_run_gets_the_grading_childs_environment(tool, padded):
    kernel, geometry = padded
    env = {"PYTHONPATH": "/graders"}
    checked = sanitizer.sanitize({"seed": 5}, kernel, geometry, env)
    assert set(checked.pop("seconds")) == set(sanitizer.TOOLS)
    assert checked == {"shape": [33, 65], "tools": dict.fromkeys(sanitizer.TOOLS, ""), "failure": ""}
    assert [run["env"] for run in tool.runs] == [env] * 3


def test_compute_sanitizer_is_found_on_path_by_its_own_name(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKSHOP_COMPUTE_SANITIZER", raising=False)
    binary = tmp_path / "compute-sanitizer"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sanitizer.tool_binary() == binary


def test_the_tools_children_run_side_by_side_and_the_first_finding_is_in_the_tools_order(monkeypatch, padded,
                                                                                          tmp_path):
    """Each child waits until all three have started (sequential runs would break the barrier), and the one
    asked for first finishes last: its finding is still the failure."""
    kernel, geometry = padded
    (tmp_path / "compute-sanitizer").write_text("")
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", str(tmp_path / "compute-sanitizer"))
    started = threading.Barrier(3, timeout=10)
    reports = {"memcheck": MEMCHECK, "racecheck": CLEAN, "initcheck": INITCHECK}

    def child(handler, request, **options):
        name = options["wrapper"][2]
        started.wait()
        if name == "memcheck":
            time.sleep(0.3)
        return ChildResult("ok", answer={}, stdout=reports[name])
    monkeypatch.setattr(sanitizer, "run_child", child)
    checked = sanitizer.sanitize({}, kernel, geometry, {})
    assert list(checked["tools"]) == list(sanitizer.TOOLS) == ["memcheck", "racecheck", "initcheck"]
    assert checked["failure"] == sanitizer.findings("memcheck", MEMCHECK)
    assert checked["tools"]["initcheck"] == sanitizer.findings("initcheck", INITCHECK)


def _memcheck_finding(n: int) -> str:
    """memcheck's block for its n-th finding as compute-sanitizer 2025.3 prints it on the H200: the finding, where,
    which thread, the address, and a host backtrace of 35 frames."""
    frames = "".join(f"=========         Host Frame: _PyEval_EvalFrameDefault [0x1d7{i:03x}] in python3\n"
                     for i in range(35))
    return (f"========= Invalid __global__ read of size 16 bytes (finding {n})\n"
            "=========     at copy_rows+0x230 in your_kernel.cu:7\n"
            "=========     by thread (64,0,0) in block (2,0,0)\n"
            "=========     Access to 0x7fac32a02348 is misaligned\n"
            "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
            f"{frames}========= \n")


@pytest.mark.parametrize("printed, kept", [(1, True), (5, False)])
def test_one_printed_finding_and_the_summary_fit_in_the_output_kept(printed, kept):
    """What comes back from a child is its output's last 4 KiB: with memcheck's host backtraces, the first of five
    printed findings is gone from it, while one printed finding is kept whole (hence `tool_wrapper`'s limit 1)."""
    report = ("========= COMPUTE-SANITIZER\n" + "".join(_memcheck_finding(n) for n in range(1, printed + 1))
              + "========= ERROR SUMMARY: 786 errors\n")
    tail = report.encode()[-capped_output.TAIL_BYTES:].decode()
    finding = sanitizer.findings("memcheck", tail)
    assert finding.startswith("compute-sanitizer --tool memcheck found 786 error(s)")
    assert ("(finding 1)" in finding) == kept, finding


# --- a submission's kernels checked together: one child per tool -------------------------------------------------

def gemm_launches(*kernel_ids: str, tools: dict[str, tuple[str, ...]] | None = None) -> list:
    """(request, kernel, geometry) of gemm's ``kernel_ids``; ``tools``: a kernel's own sanitizer_tools."""
    spec = load_spec("gemm")
    launches = []
    for kernel_id in kernel_ids:
        kernel = spec.kernel(kernel_id)
        if kernel_id in (tools or {}):
            kernel = dataclasses.replace(kernel, sanitizer_tools=tools[kernel_id])
        launches.append(({"kernel_id": kernel_id, "source": f"{kernel_id} source", "seed": 5}, kernel,
                         kernel.geometry))
    return launches


@pytest.fixture
def children(monkeypatch, tmp_path):
    """A compute-sanitizer file named by WORKSHOP_COMPUTE_SANITIZER, and a recorder of the child runs that answers
    with ``children.answer(tool, request, wrapper)`` (default: every launch launched, the tool's report clean)."""
    binary = tmp_path / "compute-sanitizer"
    binary.write_text("")
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", str(binary))
    lock = threading.Lock()

    def launched(request):
        return {"launches": [{"launched": r["shape"]} for r in request["launches"]]} if "launches" in request else {
            "launched": request["shape"]}

    recorder = types.SimpleNamespace(runs=[], answer=lambda tool, request, wrapper: ChildResult(
        "ok", answer=launched(request), stdout=CLEAN), launched=launched)

    def child(handler, request, **options):
        with lock:
            recorder.runs.append({"handler": handler, "request": request, **options})
        return recorder.answer(options["wrapper"][2], request, options["wrapper"])
    monkeypatch.setattr(sanitizer, "run_child", child)
    return recorder


def batches(runs) -> dict[str, dict]:
    return {run["wrapper"][2]: run for run in runs if "launches" in run["request"]}


def alone(runs) -> list[tuple[str, str]]:
    return sorted((run["wrapper"][2], run["request"]["kernel_id"]) for run in runs if "launches" not in run["request"])


def test_a_clean_batch_clears_every_kernel_with_one_child_per_tool(children):
    """Each tool's child launches every kernel whose spec names the tool, each at its own sanitizer shape; a tool
    that one kernel names (synccheck here) runs on it alone, as `sanitize` would."""
    launches = gemm_launches("naive", "blocktile2d", "warptiling", tools={"blocktile2d": ("memcheck", "synccheck")})
    checked = sanitizer.sanitize_together(launches, {"PYTHONPATH": "/graders"}, timeout_s=60)
    runs = batches(children.runs)
    assert len(children.runs) == 4 and alone(children.runs) == [("synccheck", "blocktile2d")]
    members = {tool: [r["kernel_id"] for r in run["request"]["launches"]] for tool, run in runs.items()}
    assert members == {"memcheck": ["naive", "blocktile2d", "warptiling"], "racecheck": ["naive", "warptiling"],
                       "initcheck": ["naive", "warptiling"]}
    assert runs["memcheck"]["request"]["launches"][1] == launches[1][0] | {"shape": [129, 255, 300]}
    assert runs["memcheck"]["wrapper"][3:9] == ("--kernel-name", "kns=sgemm_naive", "--kernel-name",
                                                "kns=sgemm_blocktile2d", "--kernel-name", "kns=sgemm_warptiling")
    assert "--kernel-name" not in runs["initcheck"]["wrapper"]
    assert {tool: run["timeout_s"] for tool, run in runs.items()} == {
        "memcheck": 60 + 3 * sanitizer.BATCH_KERNEL_S, "racecheck": 60 + 2 * sanitizer.BATCH_KERNEL_S,
        "initcheck": 60 + 2 * sanitizer.BATCH_KERNEL_S}
    assert all(run["handler"] == sanitizer.CHILD and run["gpu"] and run["env"] == {"PYTHONPATH": "/graders"}
               for run in children.runs)
    for (_, kernel, _), answer in zip(launches, checked):
        assert list(answer["tools"]) == list(kernel.sanitizer_tools) and not any(answer["tools"].values())
        assert answer["failure"] == "" and set(answer["seconds"]) == set(kernel.sanitizer_tools)
        assert answer["batched"] == {tool: len(members[tool]) for tool in kernel.sanitizer_tools if tool in members}
    assert [answer["shape"] for answer in checked] == [[33, 65, 17], [129, 255, 300], [256, 512, 96]]


def test_a_finding_in_a_batch_sends_that_tool_back_to_each_kernel_alone_and_names_only_the_kernel_it_is_in(children):
    """racecheck's batch reports a race: it clears nobody; each kernel runs under racecheck alone, watched by its own
    name, and only the racy kernel's run reports it. The other tools' batches still clear every kernel."""
    def answer(tool, request, wrapper):
        racy = tool == "racecheck" and ("launches" in request or request["kernel_id"] == "smem")
        return ChildResult("ok", answer=children.launched(request), stdout=RACECHECK if racy else CLEAN)
    children.answer = answer
    launches = gemm_launches("naive", "smem", "warptiling")
    checked = sanitizer.sanitize_together(launches, {})
    assert alone(children.runs) == [("racecheck", "naive"), ("racecheck", "smem"), ("racecheck", "warptiling")]
    for run in children.runs:
        if "launches" not in run["request"]:
            kernel = load_spec("gemm").kernel(run["request"]["kernel_id"])
            assert run["wrapper"][3:5] == ("--kernel-name", f"kns={kernel.function}")
            assert run["request"] == launches[["naive", "smem", "warptiling"].index(kernel.id)][0] | {
                "shape": list(sanitizer.sanitize_shape(kernel, kernel.geometry))}
            assert run["timeout_s"] == sanitizer.TIMEOUT_S
    race = sanitizer.findings("racecheck", RACECHECK)
    assert [answer["failure"] for answer in checked] == ["", race, ""]
    assert [answer["tools"]["racecheck"] for answer in checked] == ["", race, ""]
    assert all(answer["batched"] == {"memcheck": 3, "initcheck": 3} for answer in checked)


@pytest.mark.parametrize("batch", [
    ChildResult("timeout", message="stopped after 90 s", stdout=CLEAN),
    ChildResult("crashed", message="killed by signal 9"),
    ChildResult("ok", answer={"error": "CompileError: ..."}, stdout=CLEAN),
    ChildResult("ok", answer={"launches": []}, stdout=CLEAN),
    ChildResult("ok", answer={"launches": [{"launched": [1, 1, 1]}, {"launched": [1, 1, 1]}]}, stdout=CLEAN),
    "no summary",
], ids=["timeout", "crashed", "handler error", "too few outcomes", "other shapes", "no summary"])
def test_a_batch_that_did_not_finish_cleanly_clears_nobody(children, batch):
    def answer(tool, request, wrapper):
        if "launches" not in request:
            return ChildResult("ok", answer=children.launched(request), stdout=CLEAN)
        if batch == "no summary":
            return ChildResult("ok", answer=children.launched(request), stdout="========= COMPUTE-SANITIZER\n")
        return batch
    children.answer = answer
    checked = sanitizer.sanitize_together(gemm_launches("naive", "coalesced"), {})
    assert alone(children.runs) == sorted((tool, k) for tool in sanitizer.TOOLS for k in ("naive", "coalesced"))
    assert all(answer["failure"] == "" and answer["batched"] == {} for answer in checked)


def test_a_launch_that_failed_in_its_batch_runs_alone_and_its_failure_is_its_own(children):
    """The batch's child launched naive and warptiling but coalesced raised (it does not compile): the two are
    cleared; coalesced runs alone under each tool, where its child fails as it did, its preparation's failure."""
    def answer(tool, request, wrapper):
        if "launches" in request:
            return ChildResult("ok", stdout=CLEAN, answer={"launches": [
                {"error": "CompileError: line 3"} if r["kernel_id"] == "coalesced" else {"launched": r["shape"]}
                for r in request["launches"]]})
        return ChildResult("ok", answer={"error": "CompileError: line 3"}, stdout=CLEAN)
    children.answer = answer
    naive, coalesced, warptiling = sanitizer.sanitize_together(gemm_launches("naive", "coalesced", "warptiling"), {})
    assert alone(children.runs) == [(tool, "coalesced") for tool in sorted(sanitizer.TOOLS)]
    assert isinstance(coalesced, sanitizer.SanitizerFailed) and "CompileError: line 3" in str(coalesced)
    assert naive["batched"] == warptiling["batched"] == dict.fromkeys(sanitizer.TOOLS, 3)


def test_one_kernel_of_a_tool_runs_alone_as_sanitize_runs_it(children):
    (checked,) = sanitizer.sanitize_together(gemm_launches("naive"), {}, timeout_s=60)
    assert batches(children.runs) == {}
    assert alone(children.runs) == [(tool, "naive") for tool in sorted(sanitizer.TOOLS)]
    assert all(run["timeout_s"] == 60 for run in children.runs)
    assert checked["batched"] == {} and checked["failure"] == ""


def test_without_compute_sanitizer_a_batch_stops_before_any_run(monkeypatch):
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    monkeypatch.setattr(sanitizer, "run_child", lambda *a, **k: pytest.fail("a child ran"))
    with pytest.raises(sanitizer.SanitizerMissing):
        sanitizer.sanitize_together(gemm_launches("naive", "smem"), {})


def test_a_batch_child_launches_each_request_and_answers_each_ones_outcome(monkeypatch):
    """`launch_child.handle` with ``launches``: a launch that raises is that launch's outcome, and the next ones
    are still launched; a single request is answered as before."""
    from graders.cuda_engine import launch_child
    from graders.cuda_engine.compile import CompileError
    launched = []

    def launch_once(kernel, geometry, source, shape, *, seed, memory_fraction, lineinfo):
        if source == "broken":
            raise CompileError("line 3: expected ';'")
        launched.append((kernel.id, source, shape, seed))
    monkeypatch.setattr(launch_child, "launch_once", launch_once)
    spec = str(load_spec("gemm").path)
    requests = [{"spec_path": spec, "kernel_id": k, "source": s, "shape": [33, 65, 17], "seed": 5}
                for k, s in (("naive", "a"), ("smem", "broken"), ("warptiling", "c"))]
    assert launch_child.handle({"launches": requests}) == {"launches": [
        {"launched": [33, 65, 17]}, {"error": "CompileError: line 3: expected ';'"}, {"launched": [33, 65, 17]}]}
    assert launched == [("naive", "a", (33, 65, 17), 5), ("warptiling", "c", (33, 65, 17), 5)]
    assert launch_child.handle(requests[0]) == {"launched": [33, 65, 17]}


def test_autograde_hands_a_cuda_submissions_timed_tests_to_the_together_handler_once(children, monkeypatch):
    """`score`'s registered preparations in the trusted grader: the submission's three transpose kernels are checked
    by one compute-sanitizer child per tool, and each test takes its kernel's findings from its preparation
    (`grade._prepared_findings`, as `grade.sanitized` does) instead of running the tools."""
    from nbformat.v4 import new_code_cell, new_notebook

    from graders import autograde
    from graders.submission import Submission
    seen = {}

    def score(assignment, kernel_id, source, **options):
        spec = load_spec(assignment)
        kernel = spec.kernel(kernel_id)
        request = {"spec_path": str(spec.path.resolve()), "kernel_id": kernel_id, "source": source}
        seen[kernel_id] = grade._prepared_findings(request, kernel.geometry, kernel.sanitizer_tools)

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "score", score)
    monkeypatch.setattr(grade.counters, "measure", lambda *a, **k: {"failure": ""})
    monkeypatch.setattr(autograde, "preparing_workers", lambda: 4)
    cells = [new_code_cell(f"score('transpose', {k!r}, {k + ' source'!r})", metadata={"nbgrader": {"grade_id": k}})
             for k in ("naive", "tiled", "padded")]
    autograde._Grading(cells, Submission(new_notebook()), 2, _Log(), time_limit=60).finish()
    assert sorted(run["wrapper"][2] for run in children.runs) == sorted(sanitizer.TOOLS)
    assert all([r["kernel_id"] for r in run["request"]["launches"]] == ["naive", "tiled", "padded"]
               for run in children.runs)
    assert set(seen) == {"naive", "tiled", "padded"}
    assert all(found["prepared"] and found["failure"] == "" and found["batched"] == dict.fromkeys(sanitizer.TOOLS, 3)
               for found in seen.values())


class _Log:
    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        return lambda text, *args: self.lines.append(text % args)
