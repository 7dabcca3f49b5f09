"""Puzzle grading: ``check`` (the student's self-check), ``assert_correct`` and ``assert_within_limits`` (the
public part of each graded cell: they raise when the public check fails, so ``nbgrader validate`` fails),
``grade_correctness`` and ``grade_limits`` (the hidden tests, see `graders.hidden_tests`: during ``nbgrader
autograde`` the trusted grader calls them with the kernel parsed from the submitted file).

Every message names the puzzle by its title, as the notebook's heading does.

Each call sends the kernel's source to a fresh child process (see `graders.sandbox.run`) with a wall-clock
limit, so a kernel that hangs, crashes or exhausts memory costs only its own puzzle. On the simulator, during
`nbgrader autograde` (a `graders.sandbox.session.SessionPool`), that process is a fork of a child that has
imported numba and the grader once and never runs a kernel itself, so each puzzle still starts from an
untouched process, without paying for the imports again; so it is for the notebook's own checks, in one session
kept for the notebook's kernel (`graders.sandbox.session.process_session`). A child the worker was too busy
to run (`graders.sandbox.starvation`) runs again with a longer limit, and when it is starved again grading stops
with `WorkerStarved`: a busy worker is never the kernel's timeout. A failed hidden test
raises `PuzzleFailed` with a message the student can act on; nbgrader scores the cell 0. A passed one
prints to stdout only: nbgrader gives 0 to a test cell with *any* stderr output, and nothing from the
child (numba-cuda's warnings on a real GPU among it) reaches this process's stderr.

Each run is a `graders.result.GradeResult`. Hidden cases draw their inputs from one seed per run
(`graders.result.hidden_seed`: ``WORKSHOP_SEED`` when set), and every failure message names it.

Runs are shared where that is safe (`run_source`). A call for a run already under way (``grade_correctness``
and ``grade_limits`` of one submission grade one kernel) waits for it and takes its outcome, whatever it is (what
it raised too: a worker too busy for the one call is too busy for both).
A finished run is kept for every later call with the same puzzle, kernel text, mode, target and forced seed
(another student's identical kernel, too) only when its outcome is a verdict the child gave on the kernel
itself (`KEPT`): refused by the subset, not compiling, or run to a verdict on its outputs (ok, over the
limits, incorrect, an out-of-bounds write; on the simulator also an exception the kernel raised). Such a
verdict is what the kernel's text computes from the seed's inputs (for a kernel with a race, one of its
possible verdicts, then the same for every identical kernel): a later call reads it with that seed named, and
``WORKSHOP_SEED`` reproduces it. Never kept: a timeout, a crash, no GPU, a grader error, or a kernel error on
the GPU (a driver's out-of-memory or lost context looks the same), which depend on the machine and its load:
the next call runs a child again. `sanitizer_finding` keeps only findings of runs that finished.

Targets: ``gpu`` runs correctness on the GPU and counts accesses in a second child on numba-cuda's
simulator, whose verdict on the outputs and compute-sanitizer's also decide correctness there
(`checked_gpu_run`: the GPU run under memcheck, racecheck and the simulator side by side; ``WORKSHOP_SANITIZE=off``
skips the sanitizer); ``sim`` does both in
one simulator child. ``WORKSHOP_TARGET`` forces one; by default the GPU is used when one is found
(`graders.gpu.detect_gpu`) and ``NUMBA_ENABLE_CUDASIM`` is not set.
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from graders import settings
from graders.gpu import detect_gpu
from graders.hidden_tests import TestFailed, autograding_in_notebook, hidden_test, prepared
from graders.numba_engine import catalogue
from graders.numba_engine.kernel_source import KernelSourceError, SubmittedKernel, kernel_source
from graders.numba_engine.puzzle import NOT_WRITTEN
from graders.result import GradeResult, Status, hidden_seed, publish
from graders.sandbox.run import ChildWatch, run_child, watching
from graders.sandbox.session import process_session
from graders.sandbox.starvation import run_child_unstarved

PUBLIC_SEED = 2024          # public checks use fixed inputs; hidden tests draw a fresh seed every grading
SIM_MEMORY_BYTES = 4 << 30  # address-space cap of a simulator child
CORRECT = (Status.OK, Status.LIMITS)   # the outputs were right (the limits are graded on their own)


class PuzzleFailed(TestFailed):
    """A puzzle's hidden test failed; the message says why."""


def timeout_s() -> float:
    return settings.kernel_timeout_s()


@functools.cache
def target() -> str:
    forced = settings.forced_target()
    if forced:
        return forced
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "sim"
    return "gpu" if detect_gpu() is not None else "sim"


def target_name(t: str) -> str:
    return "the GPU" if t == "gpu" else "the simulator"


# Outcomes a finished run keeps for later calls, by target: the child's verdicts on the kernel itself.
VERDICTS = frozenset({Status.OK, Status.LIMITS, Status.INCORRECT, Status.OOB_WRITE, Status.REFUSED,
                      Status.COMPILE_ERROR})
KEPT = {"sim": VERDICTS | {Status.KERNEL_ERROR}, "gpu": VERDICTS}


@dataclasses.dataclass
class _Running:
    """A run under way; calls for the same run wait for ``done``."""

    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: GradeResult | None = None    # None when the run raised
    error: Exception | None = None       # what it raised (`WorkerStarved`, say): the waiting calls raise it too


_kept: dict[tuple, GradeResult] = {}
_running: dict[tuple, _Running] = {}
_runs_lock = threading.Lock()


def _source(kernel) -> tuple[str, str]:
    """(source, name) of a live ``@cuda.jit`` dispatcher (in a notebook) or a `SubmittedKernel` (trusted grader);
    raises `KernelSourceError`."""
    if isinstance(kernel, SubmittedKernel):
        return kernel.source, kernel.name
    return kernel_source(kernel)


def _run(puzzle_id: str, kernel, mode: str, on: str) -> GradeResult:
    try:
        source, name = _source(kernel)
    except KernelSourceError as exc:
        return GradeResult(puzzle_id, Status.REFUSED, str(exc), hidden=mode == "hidden", target=on)
    return run_source(puzzle_id, source, name, mode, on)


# What a kernel may do before its stub's ``raise`` and still write nothing: name its threads and shared arrays.
_STUB_CALLS = frozenset({"shared.array", "local.array"})


def untouched_stub(source: str, name: str) -> bool:
    """Whether kernel ``name`` in ``source`` raises NotImplementedError before it can write anything: its body
    names threads and shared or local arrays (assignments to plain names, calls to ``cuda.shared.array`` and
    ``cuda.local.array`` only), then raises, as the release's stub does. It fails every case wherever it runs,
    so the graders refuse it unrun, as the simulator would (`NOT_WRITTEN`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    kernel = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if kernel is None:
        return False
    for statement in kernel.body:
        if isinstance(statement, ast.Raise):
            raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
            return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
        if not (isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets)
                and all(_names_only(node) for node in ast.walk(statement.value))):
            return False
    return False


def _names_only(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Attribute)
                and isinstance(node.func.value.value, ast.Name) and node.func.value.value.id == "cuda"
                and f"{node.func.value.attr}.{node.func.attr}" in _STUB_CALLS)
    return not isinstance(node, (ast.Subscript, ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom))


def run_source(puzzle_id: str, source: str, name: str, mode: str, on: str) -> GradeResult:
    """Grade kernel ``name`` defined in ``source`` on the ``mode`` cases, in a child on target ``on``; or take
    the outcome of the same run under way, or kept (see the module docstring). An `untouched_stub` is refused
    without a child."""
    if untouched_stub(source, name):
        return GradeResult(puzzle_id, Status.KERNEL_ERROR, NOT_WRITTEN, hidden=mode == "hidden", target=on)
    seed = PUBLIC_SEED if mode == "public" else settings.forced_seed()   # None: a fresh one
    key = (puzzle_id, source, name, mode, on, seed)
    while True:
        with _runs_lock:
            if key in _kept:
                return _kept[key]
            running = _running.get(key)
            if running is None:
                running = _running[key] = _Running()
                break
        running.done.wait()
        if running.error is not None:
            raise running.error
        if running.result is not None:
            return running.result
    try:
        running.result = _run_child(puzzle_id, source, name, mode, on, seed)
        return running.result
    except Exception as exc:
        running.error = exc
        raise
    finally:
        with _runs_lock:
            del _running[key]
            if running.result is not None and running.result.status in KEPT[on]:
                _kept[key] = running.result
        running.done.set()


def _request(puzzle_id: str, source: str, name: str, seed: int, mode: str = "hidden", on: str = "gpu") -> dict:
    """The grading child's request (`graders.numba_engine.child`) for kernel ``name`` of ``source``."""
    return {"puzzle": puzzle_id, "source": source, "kernel_name": name, "mode": mode, "seed": seed, "target": on}


def _run_child(puzzle_id: str, source: str, name: str, mode: str, on: str,
               seed: int | None = None) -> GradeResult:
    """The kernel graded in a fresh child, on the inputs of ``seed`` (None: a fresh `hidden_seed`)."""
    puzzle = catalogue.get(puzzle_id)
    request = _request(puzzle.id, source, name, hidden_seed() if seed is None else seed, mode, on)
    child = run_child_unstarved(
        "graders.numba_engine.child", request, timeout_s=timeout_s(),
        memory_bytes=SIM_MEMORY_BYTES if on == "sim" else None,
        env={"NUMBA_ENABLE_CUDASIM": "1" if on == "sim" else "0"}, gpu=on == "gpu", forked=on == "sim",
    )
    return _child_result(request, child)


def _child_result(request: dict, child) -> GradeResult:
    """What a grading child (a `graders.sandbox.run.ChildResult`) answered ``request``: its result, or its outcome
    where it gave none (timed out, crashed: its status; its handler raised: a grader error)."""
    rerun = {"rerun": child.rerun} if child.rerun else {}   # the run that gave this result was a second one
    if child.ok and "error" not in child.answer:
        result = GradeResult.from_dict(child.answer)
        return dataclasses.replace(result, details=result.details | rerun)
    if child.ok:   # the child's handler raised: the grader's fault, not the kernel's
        status, message = Status.GRADER_ERROR, child.answer["error"]
    else:
        status, message = Status(child.status), child.message
    return GradeResult(request["puzzle"], status, message, hidden=request["mode"] == "hidden", seed=request["seed"],
                       target=request["target"], details=rerun)


def _limits_run(puzzle_id: str, kernel, mode: str) -> GradeResult:
    """Access counts always come from the simulator, also on a GPU worker."""
    return _run(puzzle_id, kernel, mode, "sim")


SIMULATOR_FAILURES = (Status.INCORRECT, Status.OOB_WRITE, Status.KERNEL_ERROR)   # the kernel's fault, not time


@contextlib.contextmanager
def _timed(phases: dict[str, float], name: str):
    """Adds the seconds of the ``with`` block to ``phases[name]``."""
    start = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.monotonic() - start, 3)


def _timed_call(phases: dict[str, float], name: str, function, *args):
    with _timed(phases, name):
        return function(*args)


def _watched(watch: ChildWatch, function, *args):
    with watching(watch):
        return function(*args)


def checked_gpu_run(puzzle_id: str, kernel, phases: dict[str, float] | None = None,
                    batched: dict | None = None) -> GradeResult:
    """The kernel's run on the GPU on the hidden cases, held, where its outputs are right, to more checks, since a
    race or a read of memory no thread wrote can come out right on a GPU by chance: the simulator's verdict on
    hidden cases (its shared and local memory start as NaN, its threads run one at a time between barriers), then
    compute-sanitizer's. The GPU run is memcheck's (`gpu_run`: one child for both); racecheck, where the kernel uses
    shared memory, runs on the same seed (`sanitizer_finding`; ``WORKSHOP_SANITIZE=off`` skips both tools).
    A failed check makes the run incorrect, with its reason and the seed that shows it. The three run side by side
    from the start (none depends on another's outcome): the GPU run and racecheck in threads of their own, the
    simulator in this thread, whose session (the trusted grader's) answers it with a fork. A check's outcome, or
    what it raised, is read only where the ones before it passed, so a wrong kernel's grade is the GPU run's as if
    the checks had not run (memcheck's finding, where it has one, is its message); racecheck's run still under way
    when its outcome will not be read is killed (a hanging kernel's ran to the tool's limit). ``phases`` gets each
    one's seconds (``gpu_run``, ``simulator``, ``sanitizer``). ``batched`` (`prepare_correctness_together`'s value):
    the GPU run, memcheck's clean, from the submission's batch, and racecheck run here only where its batch did not
    clear the kernel."""
    phases = {} if phases is None else phases
    try:
        source, name = _source(kernel)
    except KernelSourceError as exc:
        return GradeResult(puzzle_id, Status.REFUSED, str(exc), hidden=True, target="gpu")
    if untouched_stub(source, name):
        return run_source(puzzle_id, source, name, "hidden", "gpu")   # refused unrun: nothing to check
    seed = batched["run"].seed if batched else hidden_seed()
    racecheck = (settings.sanitize_enabled() and "cuda.shared.array" in source and
                 not (batched and batched["racecheck_cleared"]))
    watch = ChildWatch()   # racecheck's run, killed once the GPU run is wrong: a hang's took minutes
    with ThreadPoolExecutor(2, thread_name_prefix="gpu-checks") as pool:
        running = None if batched else pool.submit(_timed_call, phases, "gpu_run", gpu_run, puzzle_id, source, name,
                                                   seed)
        raced = (pool.submit(_timed_call, phases, "sanitizer", _watched, watch, sanitizer_finding, puzzle_id, source,
                             name, seed, ("racecheck",)) if racecheck else None)
        sim_error: Exception | None = None
        try:
            sim = _timed_call(phases, "simulator", _limits_run, puzzle_id, kernel, "hidden")
        except Exception as exc:   # read only once the GPU run is right (above)
            sim_error = exc
        run, memcheck = running.result() if running else (batched["run"], "")
        if run.status not in CORRECT or memcheck or sim_error is not None or sim.status in SIMULATOR_FAILURES:
            watch.abandon()   # racecheck's outcome will not be read
        if memcheck:
            return dataclasses.replace(run, status=Status.INCORRECT, seed=seed, message=memcheck)
        if run.status not in CORRECT:
            return run
        if sim_error is not None:
            raise sim_error
        if sim.status in SIMULATOR_FAILURES:
            return dataclasses.replace(run, status=sim.status, case=sim.case, seed=sim.seed, message=(
                "right on the GPU, but not in numba-cuda's simulator, which fills memory no thread wrote with NaN "
                f"and runs the threads one at a time between barriers (a race or an unwritten read): "
                f"{sim.failure_line()}"))
        finding = raced.result() if raced is not None else ""
    return dataclasses.replace(run, status=Status.INCORRECT, seed=seed, message=finding) if finding else run


def gpu_run(puzzle_id: str, source: str, name: str, seed: int) -> tuple[GradeResult, str]:
    """(the kernel's run on the GPU on the hidden cases of ``seed``, '' or memcheck's finding on that run): one
    child under compute-sanitizer's memcheck, whose outputs are the GPU's (the tool watches the kernel's accesses;
    a race it leaves to racecheck and the simulator), with the kernel's own time limit: a puzzle's launches take
    milliseconds under the tool, so a run past it is the kernel's timeout, as it is without the tool (a starved one
    runs again, `run_child_unstarved`). A memcheck run that gives no verdict otherwise (crashed, its report without a
    summary) is done again as a plain GPU run (`run_source`), and where that is right memcheck runs alone
    (`sanitizer_finding`, with the tool's own limit). ``WORKSHOP_SANITIZE=off``: the plain run, no finding."""
    if not settings.sanitize_enabled():
        return run_source(puzzle_id, source, name, "hidden", "gpu"), ""
    from graders.cuda_engine import sanitizer   # imported here: see `sanitizer_finding`
    request = _request(puzzle_id, source, name, seed)
    child = run_child_unstarved("graders.numba_engine.child", request, timeout_s=timeout_s(), gpu=True,
                                wrapper=sanitizer.tool_wrapper("memcheck", name), env={"NUMBA_ENABLE_CUDASIM": "0"})
    if child.status == Status.TIMEOUT:
        result = _child_result(request, child)
        return dataclasses.replace(result, message=f"{result.message} (under compute-sanitizer's memcheck)"), ""
    if child.ok and "error" not in child.answer:   # a result of its own, with the tool's report
        try:
            finding = sanitizer.findings("memcheck", child.stdout)
        except sanitizer.SanitizerFailed:
            pass
        else:
            return _child_result(request, child), finding
    run = run_source(puzzle_id, source, name, "hidden", "gpu")
    return run, sanitizer_finding(puzzle_id, source, name, seed, ("memcheck",)) if run.status in CORRECT else ""


@functools.cache   # a tool's run that does not finish raises (`sanitizer.SanitizerFailed`): never cached
def sanitizer_finding(puzzle_id: str, source: str, name: str, seed: int,
                      tools: tuple[str, ...] = ("memcheck", "racecheck")) -> str:
    """'' or the first finding (in this order) of compute-sanitizer's ``tools`` on the kernel's hidden cases on the
    GPU, side by side (racecheck only where the kernel uses shared memory). (initcheck would find nothing: every
    device array the grader passes is a copy of a host array.)"""
    # imported here: it imports cuda.core (a second), and every puzzles notebook's kernel cell imports this module
    from graders.cuda_engine import sanitizer
    tools = tuple(t for t in tools if t != "racecheck" or "cuda.shared.array" in source)
    request = _request(puzzle_id, source, name, seed)
    def finding(tool: str) -> str:
        return sanitizer.run_tool(tool, "graders.numba_engine.child", request, {"NUMBA_ENABLE_CUDASIM": "0"})
    contexts = [contextvars.copy_context() for _ in tools]   # each tool's thread in this one's (`watching`)
    with ThreadPoolExecutor(len(tools)) as pool:
        return next((found for found in pool.map(lambda c, t: c.run(finding, t), contexts, tools) if found), "")


def prepare_correctness(puzzle_id: str, kernel) -> None:
    """A puzzle prepared alone has nothing prepared: its test runs its checks beside the simulator's
    (`checked_gpu_run`)."""
    return None


def prepare_correctness_together(calls: list[tuple[tuple, dict]]) -> list:
    """For each of a submission's ``grade_correctness`` calls, on a GPU worker with the sanitizer on: its kernel's
    GPU run from one child that runs every call's kernel in turn under memcheck (`checked_gpu_run`'s run, each on a
    seed of its own), and whether racecheck cleared it, from one child that runs the kernels using shared memory in
    turn under racecheck; the two children side by side. A puzzle's kernel takes a few hundredths of a second where
    a child of its own starts Python, numba and CUDA first (about a second, with sixteen more at once).

    A kernel's run is kept only as `_batch` keeps it (the child finished within the kernels' time limit, memcheck
    counted no error, no kernel before it failed to run): otherwise its value is `NotBatched` and its test does its
    own checks. Racecheck clears a kernel only as its batch keeps that kernel's run (else its test runs racecheck
    alone). A value is ``{"run": GradeResult, "racecheck_cleared": bool}``; None for an untouched stub (its test
    refuses it unrun) and everywhere on the simulator or with the sanitizer off (each test does its work)."""
    if target() != "gpu" or not settings.sanitize_enabled():
        return [None] * len(calls)
    from graders.cuda_engine import sanitizer   # imported here: see `sanitizer_finding`
    values: list = [None] * len(calls)
    requests: dict[int, dict] = {}
    for i, (args, kwargs) in enumerate(calls):
        puzzle_id, kernel = _call_arguments(args, kwargs)
        try:
            source, name = _source(kernel)
        except KernelSourceError as exc:
            values[i] = NotBatched(str(exc))
            continue
        if not untouched_stub(source, name):   # a stub is refused unrun by its test
            requests[i] = _request(puzzle_id, source, name, hidden_seed())
    shared = [i for i, request in requests.items() if "cuda.shared.array" in request["source"]]
    with ThreadPoolExecutor(2, thread_name_prefix="gpu-batch") as pool:
        memchecked = pool.submit(_batch, sanitizer, "memcheck", list(requests.values()))
        raced = pool.submit(_batch, sanitizer, "racecheck", [requests[i] for i in shared])
        answers = dict(zip(requests, memchecked.result()))
        cleared = {i for i, answer in zip(shared, raced.result()) if answer is not None}
    for i, answer in answers.items():
        values[i] = (NotBatched("the submission's memcheck run did not give its verdict") if answer is None else
                     {"run": GradeResult.from_dict(answer), "racecheck_cleared": i in cleared})
    return values


class NotBatched(RuntimeError):
    """A puzzle whose GPU run was not taken from the submission's batch: its test does its own checks."""


def _call_arguments(args: tuple, kwargs: dict) -> tuple[str, object]:
    """(puzzle_id, kernel) of a ``grade_correctness`` call."""
    bound = inspect.signature(grade_correctness.__wrapped__).bind(*args, **kwargs)
    return bound.arguments["puzzle_id"], bound.arguments["kernel"]


# A batch's verdicts on kernels that ran, or never started, leaving the process as they found it. After any other
# (a kernel error: the CUDA context may be lost) the later kernels' verdicts could be that kernel's doing.
BATCH_CLEAN = frozenset(map(str, (Status.OK, Status.LIMITS, Status.INCORRECT, Status.OOB_WRITE, Status.REFUSED,
                                  Status.COMPILE_ERROR)))


def _batch(sanitizer, tool: str, requests: list[dict]) -> list[dict | None]:
    """For each of ``requests``, its answer from one child that runs them in turn under compute-sanitizer's
    ``tool``, watching each request's kernel, within the kernels' time limit; or None where the batch does not give
    its verdict: for every request where the child did not finish, did not answer each request on its puzzle and
    seed, or the tool counted an error (or printed no summary); for the first request answered with a verdict
    outside `BATCH_CLEAN`, and every one after it."""
    unknown: list[dict | None] = [None] * len(requests)
    if not requests:
        return unknown
    names = tuple(dict.fromkeys(request["kernel_name"] for request in requests))
    child = run_child("graders.numba_engine.child", {"launches": requests}, timeout_s=timeout_s(), gpu=True,
                      wrapper=sanitizer.tool_wrapper(tool, names), env={"NUMBA_ENABLE_CUDASIM": "0"})
    answers = child.answer.get("launches") if child.ok else None
    if not isinstance(answers, list) or len(answers) != len(requests) or not all(
            isinstance(a, dict) and (a.get("test"), a.get("seed")) == (r["puzzle"], r["seed"])
            for a, r in zip(answers, requests)):
        return unknown
    try:
        if sanitizer.findings(tool, child.stdout):
            return unknown
    except sanitizer.SanitizerFailed:
        return unknown
    clean = next((k for k, a in enumerate(answers) if a.get("status") not in BATCH_CLEAN), len(answers))
    return answers[:clean] + unknown[clean:]


@hidden_test(prepare=prepare_correctness, prepare_together=prepare_correctness_together)
def grade_correctness(puzzle_id: str, kernel) -> None:
    """Hidden test: correct on fresh random inputs at every hidden size, or `PuzzleFailed`; on the GPU,
    `checked_gpu_run` (with the submission's batched GPU run where the trusted grader prepared one). The result's
    ``phases``: the seconds of the run (``gpu_run`` or ``sim_run``) and of each check after it, for the TA's log
    and `benchmarks.grading_time`."""
    title = catalogue.get(puzzle_id).title
    phases: dict[str, float] = {}
    if target() == "gpu":
        batched = prepared()
        run = checked_gpu_run(puzzle_id, kernel, phases, batched)
        if batched:
            run = dataclasses.replace(run, details=run.details | {"batched": True})
    else:
        with _timed(phases, "sim_run"):
            run = _run(puzzle_id, kernel, "hidden", "sim")
    run = dataclasses.replace(run, details=run.details | {"phases": phases})
    publish(run)
    if run.status not in CORRECT:
        raise PuzzleFailed(f"{title}: {_failure(run)}")
    print(f"{title}: correct on {run.cases} hidden cases, run on {target_name(run.target)}")


@hidden_test
def grade_limits(puzzle_id: str, kernel) -> None:
    """Hidden test: a correct kernel within the puzzle's access limits, or `PuzzleFailed`."""
    puzzle = catalogue.get(puzzle_id)
    run = _limits_run(puzzle_id, kernel, "hidden")
    publish(run)
    if run.status not in CORRECT:
        raise PuzzleFailed(f"{puzzle.title}: access limits are graded once the kernel is correct: {_failure(run)}")
    if not run.ok:
        raise PuzzleFailed(f"{puzzle.title}: {_failure(run)}")
    print(f"{puzzle.title}: within the access limits ({puzzle.limits.describe()})")


def _failure(run: GradeResult) -> str:
    """What the student reads about a failed run: its failure line; for an untouched stub only that it is not
    written yet (no case, no seed: it fails on any input); over the access limits, beginning "access limits", as
    the check's ✓ line about them does."""
    if run.message == NOT_WRITTEN:
        return run.message
    line = run.failure_line()
    return f"access {line}" if run.status == Status.LIMITS and not run.case else line   # "limits (...): ..."


def _public(puzzle_id: str, kernel) -> tuple[GradeResult, GradeResult | None]:
    """(the public run, the public access count or None while the kernel is not correct), in the notebook's
    session."""
    with process_session():
        run = _run(puzzle_id, kernel, "public", target())
        if run.status not in CORRECT:
            return run, None
        return run, run if run.target == "sim" else _limits_run(puzzle_id, kernel, "public")


def _skipped(puzzle_id: str) -> bool:
    """While nbgrader autogrades, the notebook's own checks only say that the hidden tests grade."""
    if autograding_in_notebook():
        print(f"{catalogue.get(puzzle_id).title}: not checked here while autograding; the hidden tests grade it.")
        return True
    return False


def check(puzzle_id: str, kernel) -> None:
    """The student's self-check on the public cases: prints the same messages as the hidden tests."""
    if _skipped(puzzle_id):
        return
    puzzle = catalogue.get(puzzle_id)
    run, limits = _public(puzzle_id, kernel)
    if limits is None:
        print(f"✗ {puzzle.title}: {_failure(run)}")
        return
    print(f"✓ {puzzle.title}: correct on the {run.cases} public case(s) ({target_name(run.target)})")
    if limits.status not in CORRECT:
        print(f"✗ access limits could not be counted in the simulator: {limits.failure_line()}")
    elif not limits.ok:
        print(f"✗ {_failure(limits)}")
    else:
        print(f"✓ access limits: {puzzle.limits.describe()}")
        print("  Hidden tests use fresh random inputs and more sizes.")


def assert_correct(puzzle_id: str, kernel) -> None:
    """A graded cell's public test: `PuzzleFailed` unless the kernel is correct on the public cases."""
    if _skipped(puzzle_id):
        return
    title = catalogue.get(puzzle_id).title
    run, _ = _public(puzzle_id, kernel)
    if run.status not in CORRECT:
        raise PuzzleFailed(f"{title}: {_failure(run)}")
    print(f"✓ {title}: correct on the public case(s); graded on fresh inputs and more sizes")


def assert_within_limits(puzzle_id: str, kernel) -> None:
    """A graded cell's public test: `PuzzleFailed` unless the kernel is correct and within its access limits
    on the public cases."""
    if _skipped(puzzle_id):
        return
    puzzle = catalogue.get(puzzle_id)
    run, limits = _public(puzzle_id, kernel)
    if limits is None:
        raise PuzzleFailed(f"{puzzle.title}: access limits are graded once the kernel is correct: {_failure(run)}")
    if limits.status not in CORRECT:
        raise PuzzleFailed(f"{puzzle.title}: access limits could not be counted in the simulator: "
                           f"{limits.failure_line()}")
    if not limits.ok:
        raise PuzzleFailed(f"{puzzle.title}: {_failure(limits)}")
    print(f"✓ {puzzle.title}: within the access limits ({puzzle.limits.describe()}) on the public case(s)")
