"""A grading child stopped at its limit because the worker starved it is the worker's fault, never the kernel's
timeout (`graders.sandbox.starvation`): the rule on what a child's supervisor reported, the second run, and real
sandboxed children: one spinning past its limit, one asleep past it (a GPU hang under blocking synchronisation),
one starved by busy processes on its CPU."""
from __future__ import annotations

import pytest
from busy_cpu import busy_cpu, on_cpu

from graders.cuda_engine import counters, sanitizer
from graders.cuda_engine.grade import result_from_child
from graders.cuda_engine.spec import load_spec
from graders.result import Status
from graders.sandbox import starvation
from graders.sandbox.run import ChildResult, run_child
from graders.sandbox.starvation import RETRY_FACTOR, SHARE, WorkerStarved, run_child_unstarved, starved

LIMIT = 2.0
HANDLER = '''
import time

def handle(request):
    spin = request.get("cpu_s")   # CPU seconds to spend; None: forever
    while spin is None or time.process_time() < spin:
        pass
    time.sleep(request.get("sleep_s", 0))
    return {}
'''


def stopped(cpu: float | None, waited: float | None, status: str = "timeout") -> ChildResult:
    """A child as its supervisor last observed it, at its limit."""
    return ChildResult(status, seconds=LIMIT + 0.1, cpu_s=cpu, waited_s=waited, observed_s=LIMIT)


@pytest.mark.parametrize("run, is_starved", [
    (stopped(0.2, 1.7), True),          # ready to run all along, little CPU: the worker starved it
    (stopped(1.0, 1.0), False),         # half its limit in CPU: a loop, however busy the worker
    (stopped(0.1, 0.2), False),         # asleep (a GPU hang under blocking synchronisation): not short of a CPU
    (stopped(0.4, 0.8), True),          # as long waiting as asleep
    (stopped(0.4, 0.7), False),         # longer asleep than waiting
    (stopped(0.2, None), True),         # waits not measured: CPU time alone
    (stopped(None, 1.9), False),        # CPU time unknown: never starved
    (stopped(0.2, 1.7, "crashed"), False),
], ids=["starved", "looped", "asleep", "half-waiting", "mostly-asleep", "waits-unknown", "cpu-unknown", "crashed"])
def test_the_rule(run, is_starved):
    assert starved(run, LIMIT) is is_starved


@pytest.fixture
def runs(monkeypatch):
    """`run_child_unstarved` over a stand-in `run_child` answering ``runs["outcomes"]`` in turn, recording each
    call's limit in ``runs["limits"]``."""
    state = {"outcomes": [], "limits": []}

    def run_child(handler, request, *, timeout_s, **options):
        state["limits"].append(timeout_s)
        return state["outcomes"].pop(0)
    monkeypatch.setattr(starvation, "run_child", run_child)
    return state


def test_a_starved_child_runs_again_with_a_longer_limit_and_says_so(runs):
    runs["outcomes"] = [stopped(0.2, 1.7), ChildResult("ok", answer={"verdict": 1})]
    result = run_child_unstarved("h", {}, timeout_s=LIMIT)
    assert result.ok and result.answer == {"verdict": 1} and runs["limits"] == [LIMIT, RETRY_FACTOR * LIMIT]
    assert result.rerun.startswith("the worker was too busy during a first run: stopped after 2.1 s having run "
                                   "0.2 s of CPU (it waited 1.7 s for a CPU)")


def test_a_kernel_that_loops_on_its_second_run_is_its_own_timeout(runs):
    runs["outcomes"] = [stopped(0.2, 1.7), ChildResult("timeout", message="stopped after 6 s: it did not finish",
                                                       seconds=6.0, cpu_s=1.5, waited_s=4.0)]
    result = run_child_unstarved("h", {}, timeout_s=LIMIT)
    assert result.status == "timeout" and result.message.endswith(
        "(a second run, given 3 x its 2 s limit: the worker was too busy during the first)")


def test_starved_twice_is_the_workers_fault(runs):
    second = ChildResult("timeout", seconds=6.0, cpu_s=0.6, waited_s=5.2)
    runs["outcomes"] = [stopped(0.2, 1.7), second]
    with pytest.raises(WorkerStarved, match="^the worker was too busy to run a grading child whose limit is 2 s: "
                       r"stopped after 2\.1 s .*; then stopped after 6\.0 s having run 0\.6 s of CPU \(it waited 5\.2 "
                       r"s for a CPU\)\. Nothing was graded or recorded") as raised:
        run_child_unstarved("h", {}, timeout_s=LIMIT)
    assert raised.value.runs[1] is second


def test_a_kernels_timeout_is_not_run_again(runs):
    runs["outcomes"] = [stopped(1.2, 0.7)]
    assert run_child_unstarved("h", {}, timeout_s=LIMIT).status == "timeout" and runs["limits"] == [LIMIT]


# --- real children --------------------------------------------------------------------------------------------

@pytest.fixture
def handler(tmp_path) -> dict[str, str]:
    (tmp_path / "busy_handler.py").write_text(HANDLER)
    return {"PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize("cgroups", ["on", "off"])
def test_the_supervisor_reports_the_sandboxs_cpu_time(handler, monkeypatch, cgroups):
    if cgroups == "off":   # its fallback: the sandbox's processes read from /proc
        monkeypatch.setenv("WORKSHOP_SANDBOX_CGROUPS", "off")
    result = run_child("busy_handler", {"cpu_s": 0.6, "sleep_s": 1.0}, timeout_s=30, env=handler)
    # /proc counts CPU time in clock ticks (10 ms) and is read every half second, the last time just before the
    # sandbox's processes exit: a few ticks of the end can be missed there; the cgroup's count is exact
    missed = 0.05 if cgroups == "off" else 0.0
    assert result.ok and 0.6 - missed <= result.cpu_s < 3


def test_a_kernel_spinning_past_its_limit_is_its_own_timeout(handler):
    """`starved`'s rule calls it the kernel's timeout (a busy worker may have made it run a second time,
    `RETRY_FACTOR` x the limit): it was running or ready to run more than half the time it was observed, where the
    sleeping child below was so less than half. Its CPU time is not compared with `SHARE` of the limit here: the
    supervisor's last report can come half a second or more before the end on a loaded machine, so a spinning
    child's reported CPU time can fall short of it while the rule's other side still finds it not starved. (Under
    heavy load a run's start, bubblewrap's and Python's, is partly neither: reading files, the I/O the supervisor's
    CPU pressure does not count.)"""
    result = run_child_unstarved("busy_handler", {"cpu_s": None}, timeout_s=LIMIT, env=handler)
    assert result.status == "timeout" and not starved(result, LIMIT * (RETRY_FACTOR if result.rerun else 1))
    assert result.cpu_s + result.waited_s > result.observed_s / 2


def test_a_child_asleep_past_its_limit_is_its_own_timeout(handler):
    """As a GPU kernel that hangs while the host waits under blocking synchronisation: little CPU, as CPU time
    alone would call starved, but asleep, not waiting for a CPU."""
    result = run_child_unstarved("busy_handler", {"cpu_s": 0, "sleep_s": 60}, timeout_s=1.5 * LIMIT, env=handler)
    assert result.status == "timeout" and result.cpu_s < SHARE * LIMIT
    assert result.cpu_s + result.waited_s < result.observed_s / 2


def test_a_child_starved_by_busy_processes_on_its_cpu_is_the_workers_fault(handler):
    """Eight busy processes on the one CPU a spinning child runs on: it gets about a ninth of it, on its first run
    and on its second, and waits for it most of the time its supervisor observed (not of its wall time, whose
    sandbox start a loaded machine stretches with I/O no CPU pressure counts)."""
    with busy_cpu(8) as cpu, pytest.raises(WorkerStarved) as raised:
        on_cpu(cpu, lambda: run_child_unstarved("busy_handler", {"cpu_s": None}, timeout_s=LIMIT, env=handler))
    first, second = raised.value.runs
    assert first.seconds < RETRY_FACTOR * LIMIT <= second.seconds
    assert all(run.cpu_s < run.observed_s / 4 and run.waited_s > run.observed_s / 2 for run in (first, second))


def test_the_cuda_engine_refuses_a_starved_child_and_records_a_hung_kernels_usage():
    """A CUDA kernel graded in a child the worker starved raises (no timeout is recorded); a kernel's own timeout
    keeps what its child got from the machine."""
    spec = load_spec("transpose")
    kernel = spec.kernel("padded")
    with pytest.raises(WorkerStarved):
        result_from_child(stopped(0.2, 1.7), spec, kernel, LIMIT, seed=9)
    hung = result_from_child(stopped(1.9, 0.05), spec, kernel, LIMIT, seed=9)
    assert hung.status == Status.TIMEOUT and hung.points == 0
    assert hung.details["usage"] == {"cpu_s": 1.9, "waited_s": 0.05, "observed_s": LIMIT}


@pytest.mark.parametrize("tool", ["sanitizer", "ncu"])
def test_a_tool_run_the_worker_starved_stops_the_submission_and_the_kernels_timeout_does_not(tool, monkeypatch):
    module, limit = (sanitizer, sanitizer.TIMEOUT_S) if tool == "sanitizer" else (counters, counters.TIMEOUT_S)
    monkeypatch.setattr(sanitizer, "tool_binary", lambda: "/usr/bin/compute-sanitizer")
    monkeypatch.setattr(counters, "ncu_binary", lambda: "/usr/bin/ncu")

    def run(**outcome):
        monkeypatch.setattr(module, "run_child", lambda *a, **k: ChildResult(
            "timeout", seconds=limit + 0.1, observed_s=limit, message=f"stopped after {limit:g} s", **outcome))
        if tool == "sanitizer":
            return sanitizer.run_tool("memcheck", sanitizer.CHILD, {}, {}, "k")
        return counters.count({}, "k", "shared_bank_conflicts", {})

    with pytest.raises(WorkerStarved):
        run(cpu_s=0.1 * limit, waited_s=0.8 * limit)
    failed = sanitizer.SanitizerFailed if tool == "sanitizer" else counters.ProfilingFailed
    with pytest.raises(failed):   # it ran its limit: not the worker's fault
        run(cpu_s=limit, waited_s=0.0)
