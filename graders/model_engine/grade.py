"""Grading a ``ModelNew`` against a KernelBench-form problem: the parent side, and what notebooks call.

- `grade_model` sends one submission (the text of the cell that defines ``ModelNew``,
  `graders.model_engine.source`) to one fresh `graders.model_engine.child` process: correctness over the spec's
  trials, then the submission's timed calls. A correct one's speed-ups are over the eager reference and
  ``torch.compile`` of it, timed by `baseline`: a child of their own that runs no submission, once per grading
  process and problem (a class in one ``nbgrader autograde`` pays torch.compile's compile once, and no
  submission's code shares a process with the times it is compared with). Its ``torch.compile`` compiles into a
  cache on the worker's disk (`compile_cache`) that only baseline children see: the next grading process loads
  the compiled reference instead of compiling it again. It returns a
  `graders.result.GradeResult`: points for a correct submission, performance points by its speed-up over
  ``torch.compile`` between the problem's floor and target, ``details["fast_p"]``, ``details["baseline"]``
  (whether this grading measured it; its seconds and its child's phases), and ``details["phases"]`` (the child's
  phases, `graders.model_engine.child`, its start around them, and ``baseline`` where this grading measured it).
- `score_model` is the hidden test (`graders.hidden_tests`): the report, and the points or `KernelFailed`.
- `fast_p` is KernelBench's fast_p of a set of results: the share that is correct and at least ``p`` times as
  fast as the baseline.

- `check` is a ModelNew's check cell: one line, ✓, ✗ or ?, never a traceback: ``CHECK_TRIALS`` trials on public
  inputs at the problem's ``cpu_sizes`` in a sandboxed child, on the GPU where there is one, else on this
  machine's CPU (Triton kernels in Triton's interpreter, ``TRITON_INTERPRET=1``). `assert_runs`, the public part
  of a graded cell, raises where `check` says ✗. Neither is the grade.

On the CPU a child is a fork of a sandboxed process that imported torch and Triton once (``forked``): in the
trusted grader's session of one submission, and for a notebook's checks, in one kept for the notebook's kernel
(`graders.sandbox.session.process_session`); each fork starts from that untouched process.

``device="cpu"`` grades on this machine's CPU at the problem's ``cpu_sizes``, times with
``time.perf_counter_ns`` and leaves ``torch.compile`` out unless asked: those times say nothing of a GPU. The
hidden test grades there only where ``WORKSHOP_TARGET=sim`` says so (`grading_device`: the tests of the
nbgrader path on a machine without a GPU).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import threading
from pathlib import Path

from graders import settings
from graders.cuda_engine.grade import (KernelFailed, _child_env, assert_checked, child_phases, refuse_starved,
                                      say_checked)
from graders.gpu import detect_gpu, require_gpu
from graders.hidden_tests import NOT_WRITTEN, hidden_test
from graders.model_engine.source import ModelSource, ModelSourceError, model_from_class
from graders.model_engine.spec import ModelProblem, ModelSpec, load_model_spec
from graders.result import GradeResult, Status, hidden_seed, publish
from graders.sandbox.run import ChildResult, run_child
from graders.sandbox.session import process_session
from graders.targets_gpu import gpu_curve, student_note
from graders.worker_cache import worker_folder

CHILD = "graders.model_engine.child"
STARTUP_S = 180.0   # child start: torch import, CUDA start, Triton and torch.compile compiles, the trials
FAST_P = (1.0, 1.5)
BASELINES = ("eager", "compile")
BASELINE_SEED = 0   # the baseline's inputs: no student's seed, so one measurement serves every submission


# A grading child's memory: a ModelNew's host Python runs there. Its cgroup's cap (the sandbox as a whole, tmpfs
# included), and per process an address-space cap on the CPU (a MemoryError) or, on a GPU without a memory cgroup,
# a data-segment cap (`graders.sandbox.confine`). Sized for the largest problem: its inputs, the host copies of the
# timed calls' outputs (`timed_runs` x a 192 MiB output at the kernelbench sizes), torch.compile's compile workers.
MEMORY_BYTES = 32 << 30
CHECK_TRIALS = 2
CHECK_TIMEOUT_S = 180.0
PUBLIC_SEED = 0     # the check cell's inputs


def _env(device: str) -> dict[str, str]:
    return _child_env() | {"HOME": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton-cache",
                           "TORCHINDUCTOR_CACHE_DIR": "/tmp/inductor-cache"} \
        | ({"TRITON_INTERPRET": "1"} if device == "cpu" else {})


def grading_device() -> str:
    """Where a hidden test grades a ``ModelNew``: ``cuda``, or ``cpu`` where ``WORKSHOP_TARGET=sim``."""
    return "cpu" if settings.forced_target() == "sim" else "cuda"


def _score(spec: ModelSpec, problem: ModelProblem, status: Status, speedups: dict, device: str = "cuda") -> dict:
    """Points: correctness, and performance by the speed-up over the baseline (none for times taken on a CPU)."""
    correct = status == Status.OK
    baseline = "compile" if "compile" in speedups else "eager"
    perf = problem.perf_points(speedups.get(baseline), spec.points_perf) if correct and device == "cuda" else 0.0
    total = spec.points_correct + perf if correct else 0.0
    return {"correctness": spec.points_correct if correct else 0.0, "performance": round(perf, 4),
            "max": spec.max_points, "total": round(total, 4), "baseline": baseline}


def fast_flags(correct: bool, speedups: dict) -> dict:
    """``{baseline: {"1.0": bool, "1.5": bool}}``: whether one result counts towards fast_p at each p."""
    return {base: {str(p): bool(correct and speedups[base] >= p) for p in FAST_P} for base in speedups}


def fast_p(results: list[GradeResult], p: float, baseline: str = "compile") -> float:
    """KernelBench's fast_p over ``results``: the share that is correct and at least ``p`` times as fast as
    ``baseline`` (a result without that baseline's time counts as not fast)."""
    if not results:
        return 0.0
    fast = [r.details.get("fast_p", {}).get(baseline, {}).get(str(p), False) for r in results]
    return sum(fast) / len(results)


def result_from_child(child: ChildResult, spec: ModelSpec, problem: ModelProblem, limit_s: float,
                      seed: int, graded_on: str | None = None) -> GradeResult:
    """The child's answer, or a status for a child that hung or died, with the problem's score added; ``curve`` has
    the problem's floor and target and `graders.targets_gpu.gpu_curve`'s: the GPUs its targets were measured on and
    ``graded_on``, the worker's GPU (the child's device: a worker grades on one)."""
    if child.status == "timeout":
        refuse_starved(child, limit_s)
        answer = {"status": Status.TIMEOUT, "message": f"grading did not finish within {limit_s:g} s (the grading "
                                                       "child's time limit)"}
    elif child.status == "crashed":
        answer = {"status": Status.CRASHED, "message": f"the grading process died: {child.message}",
                  "stderr": child.stderr}
    elif "error" in child.answer:
        answer = {"status": Status.GRADER_ERROR, "message": f"the grader failed: {child.answer['error']}",
                  "traceback": child.answer.get("traceback", "")}
    else:
        answer = dict(child.answer)
    status = Status(answer.pop("status"))
    speedups = answer.get("timing", {}).get("speedup", {})
    score = _score(spec, problem, status, speedups, answer.get("device", "cuda"))
    answer.pop("seed", None)
    answer.pop("problem_id", None)
    curve = {"floor": problem.floor, "target": problem.target, "targets": spec.targets} | gpu_curve(
        spec.name, spec.measured_in, graded_on)
    return GradeResult(problem.id, status, answer.pop("message", ""), cases=answer.get("trials", 0), seed=seed,
                       points=score["total"], max_points=spec.max_points,
                       target=answer.get("device", "gpu"),
                       details=answer | {"score": score,
                                         "fast_p": fast_flags(status == Status.OK, speedups),
                                         "curve": curve,
                                         "seconds": child.seconds})


def compile_cache() -> Path:
    """Where a worker keeps what the baseline children's ``torch.compile`` compiled (Inductor's and Triton's caches):
    ``WORKSHOP_COMPILE_CACHE``, else ``~/.cache/kernel-workshop/baseline-compile``
    (`graders.worker_cache.worker_folder`). Only a baseline child, which runs the problem's reference and no
    submission, has it bound writable; no grading child of a submission sees it. What it holds is keyed by what
    was compiled and written only for a compile that succeeded (both libraries' own caches)."""
    return worker_folder("WORKSHOP_COMPILE_CACHE", "baseline-compile")


def _baseline_compile(request: dict) -> tuple[dict[str, str], tuple[Path, ...]]:
    """(the environment, the writable folder) of a baseline child's ``torch.compile``: its compiles in the child's own
    process (``TORCHINDUCTOR_COMPILE_THREADS=1``: a problem has a few kernels, and Inductor's pool of compile
    workers, one a core, costs more to start and stop than they take) and into `compile_cache`; nothing where
    nothing is compiled, and the child's own ``/tmp`` as the cache where the folder cannot be made."""
    if not request.get("compile"):
        return {}, ()
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    root = compile_cache()
    try:
        for sub in ("inductor", "triton"):
            (root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        root = root.resolve()
    except OSError:
        return env, ()
    return env | {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"), "TRITON_CACHE_DIR": str(root / "triton")}, (root,)


class BaselineFailed(RuntimeError):
    """The reference's own timing failed: the grader's fault, not the submission's."""


_baselines: dict[str, dict] = {}   # by the JSON of what the baseline depends on
_baselining = threading.Lock()


def baseline(spec: ModelSpec, problem: ModelProblem, request: dict,
             limit_s: float) -> tuple[dict, float | None, dict | None]:
    """(the reference's times for ``request``'s device, sizes, runs and compile: `graders.model_engine.child.
    baseline`'s; the seconds its child took and that child's phases (setup, eager, compile), or None, None where
    this process had measured it already). Measured by a
    child that runs no submission, on `BASELINE_SEED`'s inputs, once per process and key; a failure is not kept
    (the next grading tries again) and raises `BaselineFailed`."""
    wanted = {name: request[name] for name in ("spec_path", "problem_id", "device", "sizes", "compile", "timed_runs")}
    key = json.dumps(wanted, sort_keys=True)
    with _baselining:
        if key in _baselines:
            return _baselines[key], None, None
        device = request["device"]
        compile_env, writable = _baseline_compile(wanted)
        child = run_child(CHILD, wanted | {"mode": "baseline", "seed": BASELINE_SEED}, timeout_s=limit_s,
                          env=_env(device) | compile_env, gpu=device == "cuda", memory_bytes=MEMORY_BYTES,
                          forked=device == "cpu", writable=writable)
        if child.status == "timeout":
            refuse_starved(child, limit_s)
        if child.status != "ok" or "error" in child.answer or child.answer.get("status") != Status.OK:
            why = child.message or child.answer.get("error") or child.answer.get("message", "")
            raise BaselineFailed(f"the grader failed: timing the reference of {problem.id} ({child.status}): {why}")
        _baselines[key] = timing = child.answer["timing"]
        return timing, child.seconds, child.answer.get("phases", {})


def with_baseline(result: GradeResult, spec: ModelSpec, problem: ModelProblem, request: dict,
                  limit_s: float) -> GradeResult:
    """A correct ``result`` with the reference's times (`baseline`), the speed-ups over them and its points; any
    other as it is. A failed baseline makes it the grader's error."""
    if not result.ok or "timing" not in result.details:
        return result
    try:
        times, seconds, baseline_phases = baseline(spec, problem, request, limit_s)
    except BaselineFailed as exc:
        return dataclasses.replace(result, status=Status.GRADER_ERROR, message=str(exc), points=0.0,
                                   details=result.details | {"score": _score(spec, problem, Status.GRADER_ERROR, {})})
    mine = result.details["timing"]["submission"]["median_s"]
    timing = result.details["timing"] | times
    timing["speedup"] = {base: timing[base]["median_s"] / mine for base in BASELINES if base in timing}
    score = _score(spec, problem, result.status, timing["speedup"], result.details.get("device", "cuda"))
    phases = result.details.get("phases", {}) | ({"baseline": round(seconds, 3)} if seconds is not None else {})
    return dataclasses.replace(result, points=score["total"], details=result.details | {
        "timing": timing, "score": score, "fast_p": fast_flags(True, timing["speedup"]), "phases": phases,
        "baseline": {"measured_here": seconds is not None, "seconds": seconds, "phases": baseline_phases,
                     "seed": BASELINE_SEED}})


def grade_model(assignment: str | Path, problem_id: str, model, *, device: str | None = None,
                compile: bool | None = None, trials: int | None = None, timed_runs: int | None = None,
                timeout_s: float | None = None) -> GradeResult:
    """Check and time one ``ModelNew`` (the class, or its cell's `ModelSource`) in one sandboxed child, on
    ``device`` (default: `grading_device`)."""
    device = device or grading_device()
    spec = load_model_spec(assignment)
    problem = spec.problem(problem_id)
    try:
        source = model_from_class(model)
    except ModelSourceError as exc:
        return GradeResult(problem_id, Status.REFUSED, str(exc), points=0.0, max_points=spec.max_points,
                           details={"score": _score(spec, problem, Status.REFUSED, {})})
    graded_on = require_gpu(f"Grading {spec.name}/{problem_id}").name if device == "cuda" else None
    seed = hidden_seed()
    request = {"spec_path": str(spec.path.resolve()), "problem_id": problem_id, "source": source.source,
               "seed": seed, "device": device, "mode": "grade",
               "sizes": problem.sizes if device == "cuda" else problem.cpu_sizes,
               "compile": device == "cuda" if compile is None else compile,
               "trials": trials or spec.trials, "timed_runs": timed_runs or spec.timed_runs}
    limit = timeout_s or settings.perf_budget_s(spec.time_budget_s) + STARTUP_S
    child = run_child(CHILD, request, timeout_s=limit, env=_env(device), gpu=device == "cuda",
                      memory_bytes=MEMORY_BYTES, forked=device == "cpu")
    result = result_from_child(child, spec, problem, limit, seed, graded_on)
    result = dataclasses.replace(result, details=result.details | {"phases": child_phases(result, child)})
    return with_baseline(result, spec, problem, request, limit)


def report(result: GradeResult) -> str:
    """A few lines for the student: status, the three times and the speed-ups, points."""
    lines = [f"{result.test}: {result.status if result.ok else result.failure_line()}"]
    if result.details.get("device") == "cpu":
        lines.append("  graded on the CPU at the problem's small sizes (WORKSHOP_TARGET=sim): its times say "
                     "nothing of a GPU, so only correctness scores")
    timing = result.details.get("timing")
    if timing:
        times = "; ".join(f"{name} {timing[name]['median_s'] * 1e3:.4f} ms" for name in ("submission", *BASELINES)
                          if name in timing)
        speedups = ", ".join(f"{s:.2f}x over {name}" for name, s in timing["speedup"].items())
        lines.append(f"  median of {timing['submission']['runs']} calls on fresh inputs: {times} ({speedups})")
        note = student_note(result.details.get("curve", {}))
        if note:
            lines.append(f"  {note}")
    score = result.details["score"]
    lines.append(f"  points: {score['total']:g} of {score['max']:g}")
    return "\n".join(lines)


@hidden_test(alone=True)
def score_model(assignment: str | Path, problem_id: str, model, **options) -> float:
    """Points for one ``ModelNew``, for an nbgrader test cell; raises `KernelFailed` unless it is correct."""
    if isinstance(model, ModelSource) and model.is_stub:
        print(NOT_WRITTEN)
        raise KernelFailed(f"{problem_id}: {NOT_WRITTEN}")

    result = grade_model(assignment, problem_id, model, **options)
    publish(result)
    print(report(result))
    sys.stdout.flush()
    if not result.ok:
        raise KernelFailed(f"{problem_id}: {result.failure_line()}")
    return result.points


_checked: dict[tuple, tuple[str, str]] = {}   # what `checked` found, by problem, source and device (this process)
_lock = threading.Lock()


def checked(assignment: str | Path, problem_id: str, model) -> tuple[str, str]:
    """(``"✓"``, ``"✗"`` or ``"?"``, the line after it) for ``model`` run on public inputs at the problem's small
    sizes in a sandboxed child (see the module's docstring)."""
    try:
        spec = load_model_spec(assignment)
        problem = spec.problem(problem_id)
        source = model_from_class(model)
    except (ModelSourceError, ValueError) as exc:
        return "✗", f"{problem_id}: {exc}"
    if source.is_stub:
        return "✗", f"{problem_id}: not written yet (forward is still the stub)"
    device = "cuda" if detect_gpu() is not None else "cpu"
    key = (str(assignment), problem_id, source.source, device)
    with _lock:
        if key in _checked:
            return _checked[key]
    request = {"spec_path": str(spec.path.resolve()), "problem_id": problem_id, "source": source.source,
               "seed": PUBLIC_SEED, "device": device, "mode": "check", "sizes": problem.cpu_sizes,
               "trials": CHECK_TRIALS}
    with process_session():   # on the CPU, a fork of the notebook's child (`forked`)
        child = run_child(CHILD, request, timeout_s=CHECK_TIMEOUT_S, env=_env(device), gpu=device == "cuda",
                          memory_bytes=MEMORY_BYTES, forked=device == "cpu")
    where = "on the GPU" if device == "cuda" else "on this machine's CPU, Triton kernels in Triton's interpreter"
    sizes = ", ".join(f"{name} = {value:g}" for name, value in problem.cpu_sizes.items())
    if child.status != "ok" or "error" in child.answer:
        found = ("?", f"{problem_id}: the check did not finish: {child.message or child.answer.get('error', '')}")
    elif child.answer["status"] == Status.NO_GPU:
        found = ("?", f"{problem_id}: not run on this machine: {child.answer['message']}. The GPU worker checks it.")
    elif child.answer["status"] != Status.OK:
        found = ("✗", f"{problem_id}: {child.answer['message']} ({where}, {sizes})")
    else:
        found = ("✓", f"{problem_id}: right in {CHECK_TRIALS} trials on public inputs ({where}, {sizes}); "
                      "the GPU worker grades more trials at the problem's sizes, and the speed")
    if found[0] != "?":
        with _lock:
            _checked[key] = found
    return found


def check(assignment: str | Path, problem_id: str, model) -> None:
    """A ModelNew's check cell: one line (`checked`); never raises."""
    say_checked(problem_id, lambda: checked(assignment, problem_id, model))


def assert_runs(assignment: str | Path, problem_id: str, model) -> None:
    """The public part of a ModelNew's graded cell: `KernelFailed` where `check` says ✗."""
    assert_checked(problem_id, lambda: checked(assignment, problem_id, model))
