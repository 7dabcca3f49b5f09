"""Which puzzle runs are shared between calls (`graders.numba_engine.grade.run_source`): a run under way with
every call that waits for it, a finished one with later calls (another student's identical kernel) only when
its outcome is the child's verdict on the kernel. The grading child is a recording stand-in."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from graders.cuda_engine import sanitizer
from graders.numba_engine import grade
from graders.numba_engine.kernel_source import SubmittedKernel
from graders.result import GradeResult, Status
from graders.sandbox.run import ChildResult
from graders.sandbox.starvation import WorkerStarved

KERNEL = SubmittedKernel("from numba import cuda\n\n@cuda.jit\ndef map_kernel(out, a, size):\n"
                         "    i = cuda.threadIdx.x\n    out[i] = a[i] + 10\n", "map_kernel")
NOT_ANSWERED = {   # outcomes that depend on the machine and its load, not on the kernel
    Status.TIMEOUT: ChildResult("timeout", message="stopped after 30 s: it did not finish"),
    Status.CRASHED: ChildResult("crashed", message="the grading process was killed by SIGKILL"),
    Status.GRADER_ERROR: ChildResult("ok", answer={"error": "KeyError: 'seed'"}),
}


def answered(request: dict, status: Status = Status.OK) -> ChildResult:
    """A child that graded the kernel: its verdict, as `child.handle` answers."""
    return ChildResult("ok", answer=GradeResult(request["puzzle"], status, "" if status == Status.OK else "why",
                                                hidden=request["mode"] == "hidden", seed=request["seed"],
                                                target=request["target"], cases=3).as_dict())


@pytest.fixture
def children(monkeypatch):
    """No run kept or under way; ``state["outcomes"]`` (functions of the request, first one first, the last one
    repeated) answer the children, whose requests are recorded in ``state["requests"]``."""
    state = {"outcomes": [answered], "requests": []}
    monkeypatch.setattr(grade, "_kept", {})
    monkeypatch.setattr(grade, "_running", {})
    monkeypatch.delenv("WORKSHOP_SEED", raising=False)

    def run_child(handler, request, **options):
        state["requests"].append(request)
        outcome = state["outcomes"].pop(0) if len(state["outcomes"]) > 1 else state["outcomes"][0]
        return outcome(request)
    monkeypatch.setattr(grade, "run_child_unstarved", run_child)
    return state


@pytest.mark.parametrize("status", list(NOT_ANSWERED), ids=str)
def test_an_outcome_of_the_machine_is_never_replayed_the_next_call_runs_a_child_again(children, status):
    """A timeout under load in one student's grading is not the grade of the next student's identical kernel."""
    children["outcomes"] = [lambda request: NOT_ANSWERED[status], answered]
    with pytest.raises(grade.PuzzleFailed, match=f"^Map: {status} "):
        grade.grade_correctness("map", KERNEL)
    grade.grade_correctness("map", KERNEL)
    grade.grade_limits("map", KERNEL)
    assert len(children["requests"]) == 2


def test_a_verdict_is_kept_for_the_same_kernel_with_its_seed(children):
    grade.grade_correctness("map", KERNEL)
    grade.grade_limits("map", KERNEL)
    first = grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim")
    assert len(children["requests"]) == 1 and first.seed == children["requests"][0]["seed"]
    grade.run_source("map", KERNEL.source + "\n", KERNEL.name, "hidden", "sim")     # another text: another run
    assert len(children["requests"]) == 2


@pytest.mark.parametrize("on, kept", [("sim", True), ("gpu", False)])
def test_a_kernel_error_is_kept_on_the_simulator_only(children, on, kept):
    """On the GPU a CUDA driver's out-of-memory or lost context is a kernel error too."""
    children["outcomes"] = [lambda request: answered(request, Status.KERNEL_ERROR)]
    for _ in range(2):
        assert grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", on).status == Status.KERNEL_ERROR
    assert len(children["requests"]) == (1 if kept else 2)


def test_a_forced_seed_is_never_answered_by_a_run_on_another(children, monkeypatch):
    fresh = grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim")
    monkeypatch.setenv("WORKSHOP_SEED", "5")
    forced = grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim")
    assert forced.seed == 5 != fresh.seed and [r["seed"] for r in children["requests"]] == [fresh.seed, 5]


STARVED = WorkerStarved(5, ChildResult("timeout", seconds=5, cpu_s=0.2, waited_s=4.5))


def starved(request):
    raise STARVED


@pytest.mark.parametrize("outcome, taken", [(NOT_ANSWERED[Status.TIMEOUT], Status.TIMEOUT), (STARVED, STARVED)],
                         ids=["timeout", "worker starved"])
def test_calls_made_while_a_run_is_under_way_take_its_outcome_even_a_timeout(children, monkeypatch, outcome, taken):
    """grade_correctness and grade_limits of one submission read one child, also when it times out or the worker
    was too busy to run it; the next call runs its own."""
    started, release, waited = threading.Event(), threading.Event(), threading.Event()

    class Done(threading.Event):
        def wait(self, timeout=None):
            waited.set()
            return super().wait(timeout)

    @dataclasses.dataclass
    class Running(grade._Running):
        done: threading.Event = dataclasses.field(default_factory=Done)
    monkeypatch.setattr(grade, "_Running", Running)

    def slow(request):
        started.set()
        release.wait(10)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    children["outcomes"] = [slow, answered]
    results = []

    def call():
        try:
            results.append(grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim").status)
        except WorkerStarved as exc:
            results.append(exc)
    first = threading.Thread(target=call)
    first.start()
    assert started.wait(10)
    waiting = threading.Thread(target=call)
    waiting.start()
    assert waited.wait(10) and len(children["requests"]) == 1
    release.set()
    first.join(10)
    waiting.join(10)
    assert results == [taken, taken] and len(children["requests"]) == 1
    assert grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim").ok
    assert len(children["requests"]) == 2


def test_a_run_that_raises_leaves_the_next_call_to_run_its_own(children):
    def unavailable(request):
        raise RuntimeError("no sandbox")
    children["outcomes"] = [unavailable, answered]
    with pytest.raises(RuntimeError, match="no sandbox"):
        grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim")
    assert grade.run_source("map", KERNEL.source, KERNEL.name, "hidden", "sim").ok and not grade._running


def test_the_access_counts_come_from_the_simulator_on_a_gpu_worker_too(children, monkeypatch):
    """On a GPU worker the limits test runs its kernel in the simulator, where every access (a print's too) is
    counted; correctness runs on the GPU, then takes the simulator's verdict from that same run."""
    monkeypatch.setattr(grade, "target", lambda: "gpu")
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    grade.grade_limits("map", KERNEL)
    grade.grade_correctness("map", KERNEL)
    assert [r["target"] for r in children["requests"]] == ["sim", "gpu"]


def test_a_sanitizer_run_that_does_not_finish_is_not_cached(monkeypatch):
    runs = []

    def run_tool(tool, child, request, env):
        runs.append(tool)
        if len(runs) == 1:
            raise sanitizer.SanitizerFailed("compute-sanitizer --tool memcheck did not finish (timeout: ...)")
        return ""
    monkeypatch.setattr(sanitizer, "run_tool", run_tool)
    grade.sanitizer_finding.cache_clear()
    with pytest.raises(sanitizer.SanitizerFailed):
        grade.sanitizer_finding("map", KERNEL.source, KERNEL.name, 7)
    assert grade.sanitizer_finding("map", KERNEL.source, KERNEL.name, 7) == ""
    assert grade.sanitizer_finding("map", KERNEL.source, KERNEL.name, 7) == ""
    assert runs == ["memcheck", "memcheck"]
    grade.sanitizer_finding.cache_clear()


def test_memcheck_and_racecheck_run_side_by_side_and_memchecks_finding_comes_first(monkeypatch):
    """A kernel with shared memory is checked by both tools at once; where both find something, the student reads
    memcheck's finding, as when they ran one after the other."""
    both_started = threading.Barrier(2, timeout=10)

    def run_tool(tool, child, request, env):
        both_started.wait()   # raises BrokenBarrierError unless the other tool is running too
        return f"{tool} found 1 error(s)"
    monkeypatch.setattr(sanitizer, "run_tool", run_tool)
    shared = KERNEL.source.replace("def map_kernel(out, a, size):\n",
                                   "def map_kernel(out, a, size):\n    cache = cuda.shared.array(8, numba.float32)\n")
    grade.sanitizer_finding.cache_clear()
    assert grade.sanitizer_finding("map", shared, KERNEL.name, 7) == "memcheck found 1 error(s)"
    grade.sanitizer_finding.cache_clear()
