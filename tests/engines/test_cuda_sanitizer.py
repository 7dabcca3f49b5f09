"""compute-sanitizer as a grader, on a machine without a GPU: its reports read, the shape it runs at, the
child run under it, and what a finding does to a kernel's result. (Its real runs are in tests/gpu.)"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from graders.cuda_engine import grade, sanitizer
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.gpu import NeedsGPUWorker
from graders.result import GradeResult, Status
from graders.sandbox.run import ChildResult, run_child
from graders.settings import ROOT

FAKE_ENV = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "perf_fakes"), str(ROOT)])}
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


def test_a_child_runs_under_its_wrapper_and_its_output_comes_back():
    result = run_child("fake_perf_child", {"mode": "wrapped"}, timeout_s=60, env=FAKE_ENV,
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
    assert [r[2][:3] for r in runs] == [(str(tool_binary), "--tool", t) for t in sanitizer.TOOLS]
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
