"""Grading CUDA C++ kernels for correctness and speed: the parent side, and what notebooks call.

- `grade_kernel` sends one kernel's source (a string) to a fresh `graders.cuda_engine.child` process with a
  wall-clock limit (no address-space limit: CUDA reserves far more virtual memory than it uses; the child
  caps its GPU memory itself) and returns a `graders.result.GradeResult`: the status, the points, the seed
  of its random inputs (`graders.result.hidden_seed`: ``WORKSHOP_SEED`` when set), and the child's
  measurements in ``details`` (``GradeResult.as_dict`` gives them flat, as the GPU tests and benchmarks
  read them).
- `score` is a hidden test (`graders.hidden_tests`): it prints a short report to stdout and returns the
  points earned (nbgrader takes a test cell's number, below its points, as partial credit; a kernel timed
  faster than the hardware allows, or one that misses its problem's SASS requirements, gets its correctness
  points only), or raises `KernelFailed` for a kernel
  that is wrong, crashes, hangs or does not compile. It writes nothing to stderr
  and silences warnings.
- `check_compiles` is for students without a GPU: it compiles in-process and reports registers and spills.
  A kernel's check cell calls `check` (one line, never a traceback: after a ✗ the compiler's messages about the
  student's lines, or "not written yet" for the untouched stub); its graded cell's public part calls
  `assert_compiles`, which raises instead, so ``nbgrader validate`` fails on a kernel that does not compile.
  Where there is no GPU (and not while autograding, nor with ``WORKSHOP_CPU_PREVIEW=off``), both add the CPU
  preview of a kernel that compiles (`graders.cuda_engine.preview`): one more line, ✓, ✗ or ?, and
  `assert_compiles` raises on a ✗, so that ``nbgrader validate`` fails on a kernel the preview finds wrong.

``WORKSHOP_PERF_BUDGET_S`` (seconds), when set, replaces the spec's ``time_budget_s`` as the timing budget
of each kernel (an explicit ``budget_s`` still wins): the GPU test of the nbgrader pipeline uses it to grade
three whole submissions in a few minutes. Real grading leaves it unset.

Without a GPU, grading stops with `NeedsGPUWorker`; without compute-sanitizer on a GPU worker, with
`graders.cuda_engine.sanitizer.SanitizerMissing` (one of them).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from graders import settings
from graders.cuda_engine import counters, preview, sanitizer
from graders.cuda_engine.compile import DEFAULT_ARCH, UNKNOWN, CompileError, compile_cuda, resources_summary
from graders.cuda_engine.scoring import score_kernel
from graders.cuda_engine.spec import AssignmentSpec, Geometry, KernelSpec, load_spec, resolve_geometry
from graders.gpu import detect_gpu, require_gpu
from graders.hidden_tests import TestFailed, autograding_in_notebook, hidden_test, prepared, still_the_stub
from graders.ladder import lines_of_code
from graders.result import GradeResult, Status, hidden_seed, publish
from graders.sandbox.run import ChildResult, run_child
from graders.sandbox.starvation import refuse_starved
from graders.targets_gpu import gpu_curve, student_note

CHILD = "graders.cuda_engine.child"
PREPARE_TIMEOUT_S = 60.0   # a tool's or ncu's run in `prepare` (a whole sanitizer run took about 4.5 s on an H100)
COREDUMP_CHILD = "graders.cuda_engine.coredump_child"
# correct, but the speed is not credited: timed faster than the hardware allows, or a SASS requirement of the
# problem unmet (tensor cores in an FP32 GEMM); these keep their correctness points (a counter rule short of its
# bound is ``unmet`` too, applied after the child by `counted`, and keeps a share of the speed points)
SPEED_NOT_CREDITED = frozenset({Status.IMPLAUSIBLE, Status.UNMET})
CORRECT = SPEED_NOT_CREDITED | {Status.OK}   # the kernel's results were right: it keeps its correctness points
STARTUP_S = 90.0   # child start: torch import, CUDA start, compile, checks before and after timing


class KernelFailed(TestFailed):
    """A kernel failed its hidden test; the message says why."""


def say_checked(kernel_id: str, checked) -> None:
    """A check cell of an engine whose ``checked()`` gives (✓, ✗ or ?, the line): that line; never raises."""
    if autograding_in_notebook():
        print(f"{kernel_id}: not run here while autograding; the hidden tests grade it.")
        return
    mark, line = checked()
    print(f"{mark} {line}")


def assert_checked(kernel_id: str, checked) -> None:
    """The public part of such an engine's graded cell: `KernelFailed` where ``checked()`` says ✗."""
    if autograding_in_notebook():
        print(f"{kernel_id}: not checked here while autograding; the hidden tests grade it.")
        return
    mark, line = checked()
    if mark == "✗":
        raise KernelFailed(line)
    print(f"{mark} {line}")


def grade_kernel(assignment: str | Path, kernel_id: str, source: str, *, block=None, tile=None, params=None,
                 budget_s: float | None = None, timeout_s: float | None = None,
                 memory_fraction: float = 0.25, sanitize: bool = True, profile: bool = True) -> GradeResult:
    """Check and time one kernel in a child process (see `result_from_child`; inside a
    `graders.sandbox.session.ChildSession`, the submission's child); then, for a correct kernel, run
    it under compute-sanitizer (`sanitized`; not with ``sanitize=False`` or ``WORKSHOP_SANITIZE=off``) and
    apply its spec's counter rule (`counted`; not with ``profile=False``).

    ``details["lines_of_code"]`` counts the source's lines of code (`graders.ladder.lines_of_code`);
    ``details["phases"]`` has the seconds of each phase: the child's own (`graders.cuda_engine.child.Phases`:
    setup, cuda_start, compile, correctness, timing, recheck), ``child_start`` (the rest of the child's wall
    time: the sandbox, Python and the request's way in and out), ``sanitizer`` and ``ncu``."""
    spec = load_spec(assignment)
    kernel = spec.kernel(kernel_id)
    geometry = resolve_geometry(kernel, block, tile, params)
    if spec.requires_gpu:
        require_gpu(f"Grading {spec.name}/{kernel_id}")
    budget = budget_s if budget_s is not None else _budget_from_env(spec.time_budget_s)
    seed = hidden_seed()
    request = _request(spec, kernel_id, source, geometry, block, tile, params, memory_fraction, seed) | {
        "budget_s": budget}
    limit = timeout_s if timeout_s is not None else budget + STARTUP_S
    child = run_child(CHILD, request, timeout_s=limit, env=_child_env(), gpu=True, reusable=True)
    result = result_from_child(child, spec, kernel, limit, seed)
    phases = child_phases(result, child)
    if sanitize and settings.sanitize_enabled() and result.status in CORRECT:
        started = time.monotonic()
        result = sanitized(result, kernel, request, geometry)
        phases["sanitizer"] = round(time.monotonic() - started, 3)
    if sanitize and settings.sanitize_enabled() and result.status == Status.CRASHED and kernel.explain_crash:
        started = time.monotonic()
        result = explained(result, kernel, request)
        phases["sanitizer"] = round(time.monotonic() - started, 3)
    if profile and kernel.counter and result.status in CORRECT:
        started = time.monotonic()
        result = counted(result, spec, kernel, request, geometry)
        phases["ncu"] = round(time.monotonic() - started, 3)
    return dataclasses.replace(result, details=result.details | {"phases": phases,
                                                                 "lines_of_code": lines_of_code(source, "//")})


def _rescored(result: GradeResult, kernel: KernelSpec, status: Status, message: str, *, correct: bool,
              **details) -> GradeResult:
    """``result`` with a new status and message, and ``details`` added: its correctness points only, or none."""
    score = score_kernel(kernel, correct, 0.0)   # a ratio of 0 earns no speed points
    return dataclasses.replace(result, status=status, message=message, points=score.total,
                               details=result.details | details | {"score": score.as_dict()})


def counted(result: GradeResult, spec: AssignmentSpec, kernel: KernelSpec, request: dict,
            geometry) -> GradeResult:
    """``result`` with the kernel's counter rule applied (`graders.cuda_engine.counters`): its speed points
    multiplied by the rule's share (`graders.cuda_engine.scoring.counter_share`: 1 at the rule's bound, 0 at the
    reference's count, a log scale between). Short of the bound the status is ``unmet`` whatever the share (the
    bound is the step's lesson; the points say how far the kernel got), with the share in the message. A result
    whose speed is not credited already (``implausible``, an unmet SASS requirement) only records the counts. The
    counts of the test's preparation (`prepare`) stand in where they are of this launch."""
    try:
        ready = _prepared(request, geometry, "counter")
        measured = (ready | {"prepared": True} if ready is not None
                    else counters.measure(spec, kernel, request, _child_env()))
    except counters.ProfilingFailed as exc:
        return _rescored(result, kernel, Status.GRADER_ERROR, f"the grader failed: {exc}", correct=False)
    if not measured["failure"] or not result.ok:
        return dataclasses.replace(result, details=result.details | {"counter": measured})
    score = score_kernel(kernel, True, result.details.get("timing", {}).get("ratio"), measured["share"])
    return dataclasses.replace(result, status=Status.UNMET, message=f"correct, but {measured['failure']}",
                               points=score.total,
                               details=result.details | {"counter": measured, "score": score.as_dict()})


def _request(spec: AssignmentSpec, kernel_id: str, source: str, geometry, block, tile, params,
             memory_fraction: float, seed: int) -> dict:
    """What a child needs to launch the kernel (the grading child adds its timing budget)."""
    return {"spec_path": str(spec.path.resolve()), "kernel_id": kernel_id, "source": source,
            "block": list(geometry.block) if block is not None else None,
            "tile": list(geometry.tile) if tile is not None else None,
            "params": dict(params) if params is not None else None,
            "memory_fraction": memory_fraction, "seed": seed, "launch_timeout_s": settings.launch_timeout_s()}


def _prepared_launch(request: dict, geometry) -> tuple:
    """Which launch a preparation (`prepare`) checked and counted: the spec, the kernel, its source and its
    geometry."""
    return request["spec_path"], request["kernel_id"], request["source"], geometry


@dataclasses.dataclass(frozen=True)
class _Preparation:
    """What a preparation (`prepare`) works on: the kernel's spec, the launch the test grades, what it does."""

    spec: AssignmentSpec
    kernel: KernelSpec
    geometry: Geometry
    request: dict
    sanitizing: bool
    profiling: bool


def _preparation(assignment: str | Path, kernel_id: str, source: str, *, block=None, tile=None, params=None,
                 memory_fraction: float = 0.25, sanitize: bool = True, profile: bool = True,
                 **_) -> _Preparation | None:
    """`score`'s arguments as a preparation's work; None where it has neither tools to run nor counts to make."""
    spec = load_spec(assignment)
    kernel = spec.kernel(kernel_id)
    sanitizing = sanitize and settings.sanitize_enabled()
    profiling = profile and kernel.counter is not None
    if not sanitizing and not profiling:
        return None
    geometry = resolve_geometry(kernel, block, tile, params)
    request = _request(spec, kernel_id, source, geometry, block, tile, params, memory_fraction, hidden_seed())
    return _Preparation(spec, kernel, geometry, request, sanitizing, profiling)


def prepare(*args, **kwargs) -> dict | None:
    """`score`'s preparation (called with its arguments), before any kernel of the submission is timed (the trusted
    grader runs the preparations side by side: `graders.autograde`): the kernel under every compute-sanitizer tool
    its spec names (``checked``), and its counter rule's Nsight Compute counts (``counter``,
    `graders.cuda_engine.counters.measure`: one ncu at a time in this process), so that `sanitized` and `counted`
    take these instead of running between two timed kernels. None where it has neither to do. Raises what
    `graders.cuda_engine.sanitizer.sanitize` raises, also a run past `PREPARE_TIMEOUT_S` (a kernel that hangs: the
    test finds that first, and runs no tool on it); a count that fails is left to the test (``counter_error`` says
    why)."""
    work = _preparation(*args, **kwargs)
    if work is None:
        return None
    started = time.monotonic()
    checked = (sanitizer.sanitize(work.request, work.kernel, work.geometry, _child_env(), work.kernel.sanitizer_tools,
                                  timeout_s=PREPARE_TIMEOUT_S) if work.sanitizing else None)
    return _value(work, checked, started, lambda: _count(work))


def prepare_together(calls: list[tuple[tuple, dict]]) -> list:
    """The preparations (`prepare`) of a submission's calls of `score` (each its arguments and keywords), in one: for
    each call what `prepare` returns, or the exception it would raise. The kernels' compute-sanitizer runs are one
    child per tool for all of them (`graders.cuda_engine.sanitizer.sanitize_together`: the same findings); beside
    them, one at a time, the counts of each kernel with a counter rule (a count is not a time: the children beside
    it do not change it), kept where the kernel has no finding. A value's ``seconds`` count from the start of them
    all. Raises `graders.cuda_engine.sanitizer.SanitizerMissing` without compute-sanitizer."""
    works: list[_Preparation | None | Exception] = []
    for args, kwargs in calls:
        try:
            works.append(_preparation(*args, **kwargs))
        except Exception as exc:   # that call's own preparation fails so
            works.append(exc)
    started = time.monotonic()
    checking = [i for i, work in enumerate(works) if isinstance(work, _Preparation) and work.sanitizing]
    launches = [(works[i].request, works[i].kernel, works[i].geometry) for i in checking]
    with ThreadPoolExecutor(1, thread_name_prefix="counting") as counting:
        counts = {i: counting.submit(_count, work) for i, work in enumerate(works)
                  if isinstance(work, _Preparation) and work.profiling}
        found = (dict(zip(checking, sanitizer.sanitize_together(launches, _child_env(), PREPARE_TIMEOUT_S)))
                 if checking else {})
        values = []
        for i, work in enumerate(works):
            if not isinstance(work, _Preparation) or isinstance(found.get(i), Exception):
                values.append(found.get(i, work))   # nothing to prepare, or what its preparation would raise
                continue
            values.append(_value(work, found.get(i), started, counts[i].result if i in counts else dict))
    return values


def _value(work: _Preparation, checked: dict | None, started: float, count: Callable[[], dict]) -> dict:
    """A preparation's value: its launch, its findings ``checked`` and, for a kernel with a counter rule and no
    finding, what ``count`` gives (`_count`'s counts, or why counting failed), and its seconds since ``started``."""
    value = {"launch": _prepared_launch(work.request, work.geometry), "checked": checked, "counter": None}
    if work.profiling and not (checked or {}).get("failure"):
        value |= count()
    return value | {"seconds": round(time.monotonic() - started, 3)}


def _count(work: _Preparation) -> dict:
    """``{"counter": counts}`` of the kernel's counter rule (`graders.cuda_engine.counters.measure`), or
    ``{"counter_error": why}`` where counting failed: the test counts again, and says what failed."""
    try:
        return {"counter": counters.measure(work.spec, work.kernel, work.request, _child_env(),
                                            timeout_s=PREPARE_TIMEOUT_S)}
    except Exception as exc:
        return {"counter_error": f"{type(exc).__name__}: {exc}"}


def _prepared(request: dict, geometry, part: str):
    """Part ``part`` (``checked``, ``counter``) of the running test's preparation (`prepare`) where it is of this
    launch; else None."""
    ready = prepared()
    if not isinstance(ready, dict) or ready.get("launch") != _prepared_launch(request, geometry):
        return None
    return ready.get(part)


def _prepared_findings(request: dict, geometry, tools: tuple[str, ...]) -> dict | None:
    """The findings of ``tools`` on this launch from the running test's preparation (`prepare`), in
    `graders.cuda_engine.sanitizer.sanitize`'s form; None where it has none of this launch or not every tool."""
    checked = _prepared(request, geometry, "checked")
    if checked is None or not set(tools) <= set(checked["tools"]):
        return None
    return sanitizer.for_tools(checked, tools) | {"prepared": True}


def sanitized(result: GradeResult, kernel: KernelSpec, request: dict, geometry) -> GradeResult:
    """``result`` after the kernel's launch under compute-sanitizer (`graders.cuda_engine.sanitizer`): a race,
    an uninitialised read, a barrier misused or an invalid access makes it incorrect (no points), with the tool's own
    line. The tools are the spec's ``sanitizer_tools``; racecheck runs only for a kernel that uses shared memory (or
    whose usage is unknown). The findings of the test's preparation (`prepare`) stand in for the runs where
    they are of this launch."""
    usage = (result.details.get("compile", {}).get("resources") or {}).get(kernel.function) or {}
    tools = tuple(t for t in kernel.sanitizer_tools if t != "racecheck" or usage.get("shared_bytes") != 0)
    try:
        checked = (_prepared_findings(request, geometry, tools)
                   or sanitizer.sanitize(request, kernel, geometry, _child_env(), tools))
    except sanitizer.SanitizerFailed as exc:
        return _rescored(result, kernel, Status.GRADER_ERROR, f"the grader failed: {exc}", correct=False)
    if not checked["failure"]:
        return dataclasses.replace(result, details=result.details | {"sanitizer": checked})
    return _rescored(result, kernel, Status.INCORRECT, checked["failure"], correct=False, sanitizer=checked)


def crash_shape(result: GradeResult, kernel: KernelSpec) -> tuple[int, ...] | None:
    """The check shape a crashed kernel crashed at: the one after those it passed, before any timing; None when it
    crashed elsewhere (compiling, timing, the re-check, starting CUDA)."""
    checks = result.details.get("checks")
    if checks is None or "timing" in result.details or not result.message.startswith("CUDA error while checking "
                                                                                        "correctness"):
        return None
    return kernel.check_shapes[len(checks)] if len(checks) < len(kernel.check_shapes) else None


def explained(result: GradeResult, kernel: KernelSpec, request: dict) -> GradeResult:
    """A crashed ``result`` with what the GPU worker saw of the crash added to its message, where its spec asks
    (``explain_crash``): the kernel launched twice more at the check shape it crashed at, compiled with its source
    lines, once under memcheck (`graders.cuda_engine.sanitizer.crash_report`: the access and its line) and once with
    the CUDA driver's core dump on, read with cuda-gdb (`graders.cuda_engine.coredump_child`: the exception, its PC
    and line); recorded in ``details["crash_report"]`` (with why a core dump gave nothing). Unchanged where the shape
    is not known; a missing compute-sanitizer still stops grading."""
    from graders.cuda_engine.coredump_child import ENV   # the child's module imports CUDA's: not for every notebook
    shape = crash_shape(result, kernel)
    if shape is None:
        return result
    block = sanitizer.crash_report(request, kernel, _child_env(), shape)
    dump = run_child(COREDUMP_CHILD, request | {"shape": list(shape)}, timeout_s=sanitizer.TIMEOUT_S, gpu=True,
                     env=_child_env() | ENV)
    dumped = dump.answer.get("lines", []) if dump.ok else []
    label = "x".join(map(str, shape))
    parts = ([f"compute-sanitizer --tool memcheck, one launch at shape {label}:", *(f"  {line}" for line in block)]
             if block else [])
    parts += ([f"the CUDA core dump of one launch at shape {label}, read with cuda-gdb:", *(f"  {line}" for line in dumped)]
              if dumped else [])
    why = (dump.answer.get("why") or dump.answer.get("error", "")) if dump.ok else f"its child {dump.status}: {dump.message}"
    details = {"shape": list(shape), "lines": block, "core_dump": dumped, "core_dump_missing": "" if dumped else why}
    message = "\n".join([result.message, *parts])
    return dataclasses.replace(result, message=message, details=result.details | {"crash_report": details})


def child_phases(result: GradeResult, child: ChildResult) -> dict[str, float]:
    """The child's phases in ``result`` and ``child_start``: the rest of the child's wall time (the sandbox,
    Python and the request's way in and out)."""
    phases = dict(result.details.get("phases", {}))
    phases["child_start"] = round(max(0.0, child.seconds - sum(phases.values())), 3)
    return phases


def _budget_from_env(default: float) -> float:
    return settings.perf_budget_s(default)


def _child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(settings.PACKAGE_ROOT), path) if p)}


def result_from_child(child: ChildResult, spec: AssignmentSpec, kernel: KernelSpec, limit_s: float,
                      seed: int) -> GradeResult:
    """The child's answer, or a status for a child that hung or died, with the kernel's score added.

    ``details`` keeps the answer's measurements (``compile``, ``checks``, ``timing``, ``environment``, ...)
    and adds ``score`` (correctness, performance, max, total), ``curve`` (the kernel's floor and target, and
    `graders.targets_gpu.gpu_curve`'s: the GPUs the targets were measured on, ``graded_on`` where the answer's
    ``environment`` names the grading GPU) and ``seconds``. A child the worker starved
    at its limit (`graders.sandbox.starvation.starved`) raises `WorkerStarved` instead: it is no timeout of the
    kernel's."""
    if child.status == "timeout":
        refuse_starved(child, limit_s)   # the worker was too busy, not the kernel slow: nothing is recorded
        answer = {"status": Status.TIMEOUT, "message": f"your kernel did not finish within {limit_s:g} s "
                  "(an endless loop? a __syncthreads() that not every thread reaches?)",
                  "usage": {"cpu_s": child.cpu_s, "waited_s": child.waited_s, "observed_s": child.observed_s}}
    elif child.status == "crashed":
        answer = {"status": Status.CRASHED, "message": f"the grading process died: {child.message}",
                  "stderr": child.stderr}
    elif "error" in child.answer:
        answer = {"status": Status.GRADER_ERROR, "message": f"the grader failed: {child.answer['error']}",
                  "traceback": child.answer.get("traceback", ""), "stderr": child.stderr}
    else:
        answer = dict(child.answer)
    status = Status(answer.pop("status"))
    if status in SPEED_NOT_CREDITED:
        points = score_kernel(kernel, True, 0.0)     # correct, but its speed is not credited
    else:
        points = score_kernel(kernel, status == Status.OK, answer.get("timing", {}).get("ratio"))
    answer.pop("kernel_id", None)
    answer.pop("seed", None)
    environment = answer.get("environment")
    graded_on = environment.get("gpu") if isinstance(environment, dict) else None
    curve = {"floor": kernel.floor, "target": kernel.target, "targets": spec.targets} | gpu_curve(
        spec.name, spec.measured_in, graded_on)
    return GradeResult(
        kernel.id, status, answer.pop("message", ""), cases=len(answer.get("checks", [])), seed=seed,
        points=points.total, max_points=points.max, target="gpu",
        details=answer | {"score": points.as_dict(), "curve": curve, "seconds": child.seconds})


def report(result: GradeResult) -> str:
    """A few lines for the student: status, speed against the baseline (and a note where the targets were measured
    on another GPU model: `graders.targets_gpu.student_note`), a counter rule's scale, points."""
    s = result.details["score"]
    lines = [f"{result.test}: {result.status if result.ok else result.failure_line()}"]
    timing = result.details.get("timing")
    if timing:
        unit = timing["work_unit"]
        k, b = timing["kernel"], timing["baseline"]
        lines.append(f"  your kernel {k['median_s'] * 1e3:.4f} ms ({_rate(k['throughput'], unit)}); "
                     f"{b['name']} {b['median_s'] * 1e3:.4f} ms ({_rate(b['throughput'], unit)}); "
                     f"ratio {timing['ratio']:.3f} (full marks at {result.details['curve']['target']:g}, "
                     f"none below {result.details['curve']['floor']:g})")
        probe = timing.get("instruction_ceiling")
        if probe:
            lines.append(f"  {probe['name']}, measured here: {_rate(probe['throughput'], unit)}; your kernel at "
                         f"{100 * k['throughput'] / probe['throughput']:.1f}% of it (reported, not scored)")
        note = student_note(result.details["curve"])
        if note:
            lines.append(f"  {note}")
    counter = result.details.get("counter")
    if counter:
        lines += [f"  {line}" for line in counters.scale_lines(counter)]
    for name, r in (result.details.get("compile", {}).get("resources") or {}).items():
        lines.append(f"  {name}: {resources_summary(r)}")
    lines.append(f"  points: {s['total']:.2f} / {s['max']:g} (correctness {s['correctness']:g}, "
                 f"speed {s['performance']:.2f})")
    return "\n".join(lines)


def _rate(per_second: float, unit: str) -> str:
    return f"{per_second / 1e9:.0f} G{unit}/s"


@hidden_test(alone=True, prepare=prepare, prepare_together=prepare_together)
def score(assignment: str | Path, kernel_id: str, source: str, **options) -> float:
    """Points for one kernel, for an nbgrader test cell; raises `KernelFailed` unless it is correct.

    Without a GPU worker for a GPU-only assignment it raises `NeedsGPUWorker`: the trusted grader then
    stops the submission instead of recording zeros."""
    return points(kernel_id, lambda: grade_kernel(assignment, kernel_id, source, **options))


def points(kernel_id: str, grade: Callable[[], GradeResult]) -> float:
    """A hidden test's end, for every engine that grades as this one: ``grade()`` with warnings silenced, its result
    published and its `report` printed, then its points, or `KernelFailed` unless it is correct."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = grade()
    publish(result)
    print(report(result))
    sys.stdout.flush()
    if result.status not in CORRECT:
        raise KernelFailed(f"{kernel_id}: {result.failure_line()}")
    return round(result.points, 4)


def check_compiles(assignment: str | Path, kernel_id: str, source: str, *, block=None, tile=None,
                   params=None) -> dict:
    """Compile one kernel as the grader will (no GPU needed); print its resources, raise `CompileError`."""
    resources, line = _compile(assignment, kernel_id, source, block, tile, params)
    print(line)
    return resources


def _compile(assignment: str | Path, kernel_id: str, source: str, block, tile, params) -> tuple[dict, str]:
    """(each kernel's resources, one line for the student) of one kernel compiled as the grader will."""
    kernel = load_spec(assignment).kernel(kernel_id)
    geometry = resolve_geometry(kernel, block, tile, params)
    gpu = detect_gpu()
    compiled = compile_cuda(source, kernels=(kernel.function,), defines=geometry.defines(),
                            arch=kernel.launch.arch or (gpu.arch if gpu else DEFAULT_ARCH),
                            libraries=kernel.launch.libraries)
    usage = compiled.resources.get(kernel.function, UNKNOWN)   # ptxas's report is best-effort
    return compiled.resources_dict(), (
        f"{kernel.function} compiles for {compiled.arch}: {usage.summary()}. "
        f"Launched as <<<grid, ({geometry.block[0]}, {geometry.block[1]})>>>, a {geometry.tile[0]} x "
        f"{geometry.tile[1]} tile per block" + "".join(f", {k} = {v}" for k, v in geometry.params) + ". "
        "Correctness and speed are checked on the GPU worker.")


def _unwritten_line(kernel_id: str) -> str:
    return f"{kernel_id}: not written yet (its body is still the stub's comment)"


def _preview(assignment: str | Path, kernel_id: str, source: str, launch: dict) -> preview.Preview | None:
    """The CPU preview of a kernel that compiles, where it runs: no GPU here, not autograding (the preview never
    scores), not turned off with ``WORKSHOP_CPU_PREVIEW=off``."""
    if autograding_in_notebook() or not preview.enabled() or detect_gpu() is not None:
        return None
    return preview.preview(assignment, kernel_id, source, block=launch.get("block"), tile=launch.get("tile"),
                           params=launch.get("params"))


def check(assignment: str | Path, kernel_id: str, source: str, **launch) -> None:
    """A kernel's check cell: what `check_compiles` prints and, without a GPU, the CPU preview's line; or, after a
    ✗, that it is not written yet or the compiler's messages about the student's lines; never raises."""
    if still_the_stub(source):
        print(f"✗ {_unwritten_line(kernel_id)}")
        return
    try:
        check_compiles(assignment, kernel_id, source, **launch)
    except CompileError as exc:
        print(f"✗ {kernel_id}: {exc}")
        return
    found = _preview(assignment, kernel_id, source, launch)
    if found:
        print(found.line)


def assert_compiles(assignment: str | Path, kernel_id: str, source: str, *, preview: bool = True, **launch) -> None:
    """The public part of a kernel's graded cells: `KernelFailed` unless it is written and compiles and, where the
    CPU preview runs (not with ``preview=False``: a track whose lesson is finding the bug with the GPU's tools),
    unless the preview finds it wrong."""
    if autograding_in_notebook():
        print(f"{kernel_id}: not checked here while autograding; the hidden tests grade it.")
        return
    if still_the_stub(source):
        raise KernelFailed(_unwritten_line(kernel_id))
    try:
        _compile(assignment, kernel_id, source, launch.get("block"), launch.get("tile"), launch.get("params"))
    except CompileError as exc:
        raise KernelFailed(f"{kernel_id}: {exc}") from None
    found = _preview(assignment, kernel_id, source, launch) if preview else None
    if found and found.verdict == "wrong":
        raise KernelFailed(f"{kernel_id}: {found.failure}")
    print(f"✓ {kernel_id} compiles; correctness and speed are checked on the GPU worker.")
    if found:
        print(found.line)
