"""Grading Triton kernels for correctness and speed: the parent side, and what notebooks call.

- `grade_triton` sends one kernel (its source as read from its cell, `graders.triton_engine.kernel_source`, and
  the launch the student chose) to a fresh `graders.triton_engine.child` process on the GPU, with a wall-clock
  limit that also bounds Triton's compiles, and returns a `graders.result.GradeResult` as the CUDA C++ engine
  does (`graders.cuda_engine.grade.result_from_child`: status, points, seed, the child's measurements).
- `score_triton` is the hidden test (`graders.hidden_tests`): the report, and the points or `KernelFailed`.
- `check` is a kernel's check cell: one line, ✓, ✗ or ?, never a traceback. It runs the kernel at the check
  shapes on public inputs in a sandboxed child: on the GPU where there is one, else in Triton's interpreter
  on this machine's CPU (``TRITON_INTERPRET=1``), at the shapes of at most `PREVIEW_ELEMENTS` elements (a
  kind the interpreter cannot check, ``interpreter_gap`` of ``tracks/triton/problem.py``: ? and why). An
  autotuned kernel runs its first config there; on the CPU the child is a fork of one kept for the notebook's
  kernel, which imported torch and Triton once (`graders.sandbox.session.process_session`). `assert_runs`, the
  public part of a graded cell, raises where `check` says ✗, so that ``nbgrader validate`` fails on a kernel the
  check finds wrong. Neither is the grade.

``WORKSHOP_PERF_BUDGET_S`` replaces the spec's ``time_budget_s`` as in the CUDA C++ engine.
"""
from __future__ import annotations

import dataclasses
import math
import threading
from pathlib import Path

from graders import settings
from graders.cuda_engine.grade import KernelFailed, assert_checked, child_phases, points, result_from_child, say_checked
from graders.cuda_engine.grade import _child_env as cuda_child_env
from graders.cuda_engine.problems import problem
from graders.cuda_engine.scoring import score_kernel
from graders.cuda_engine.spec import SpecError
from graders.gpu import detect_gpu, require_gpu
from graders.hidden_tests import NOT_WRITTEN, hidden_test
from graders.ladder import lines_of_code
from graders.result import GradeResult, Status, hidden_seed
from graders.sandbox.run import run_child
from graders.sandbox.session import process_session
from graders.triton_engine.kernel_source import TritonKernel, TritonSourceError, kernel_from_function
from graders.triton_engine.spec import load_triton_spec, resolve_launch

CHILD = "graders.triton_engine.child"
STARTUP_S = 120.0       # child start: torch and triton imports, CUDA start, a compile per BLOCK_SIZE, checks
CHECK_TIMEOUT_S = 120.0
PREVIEW_ELEMENTS = 1 << 16   # the interpreter's check shapes: at most this many output elements
PUBLIC_SEED = 0              # the check cell's inputs
CACHE_DIR = "/tmp/triton-cache"   # in the child's private /tmp


def _child_env(interpret: bool = False) -> dict[str, str]:
    env = cuda_child_env() | {"TRITON_CACHE_DIR": CACHE_DIR, "TRITON_HOME": "/tmp"}
    return env | ({"TRITON_INTERPRET": "1"} if interpret else {})


def grade_triton(assignment: str | Path, kernel_id: str, kernel, launch: dict | None = None, *,
                 budget_s: float | None = None, timeout_s: float | None = None,
                 memory_fraction: float = 0.25) -> GradeResult:
    """Check and time one Triton kernel in a sandboxed GPU child; ``details["phases"]`` as the CUDA C++ engine's
    (the child's own and ``child_start``); ``details["lines_of_code"]`` as `graders.ladder.lines_of_code` counts."""
    spec = load_triton_spec(assignment)
    kernel_spec = spec.kernel(kernel_id)
    try:
        resolve_launch(spec.launches[kernel_id], launch)   # refused here, before any child, unless the spec allows it
        source = kernel_from_function(kernel)
    except (SpecError, TritonSourceError) as exc:
        score = score_kernel(kernel_spec, False, None)
        return GradeResult(kernel_id, Status.REFUSED, str(exc), points=0.0, max_points=score.max, target="gpu",
                           details={"score": score.as_dict()})
    if spec.assignment.requires_gpu:
        require_gpu(f"Grading {spec.assignment.name}/{kernel_id}")
    budget = budget_s if budget_s is not None else settings.perf_budget_s(spec.assignment.time_budget_s)
    seed = hidden_seed()
    request = {"spec_path": str(spec.assignment.path.resolve()), "kernel_id": kernel_id, "source": source.source,
               "launch": launch, "budget_s": budget,
               "memory_fraction": memory_fraction, "seed": seed, "mode": "grade",
               "launch_timeout_s": settings.launch_timeout_s()}
    limit = timeout_s if timeout_s is not None else budget + STARTUP_S
    child = run_child(CHILD, request, timeout_s=limit, env=_child_env(), gpu=True)
    result = result_from_child(child, spec.assignment, kernel_spec, limit, seed)
    return dataclasses.replace(result, details=result.details | {"phases": child_phases(result, child),
                                                                 "lines_of_code": lines_of_code(source.source, "#")})


@hidden_test(alone=True)
def score_triton(assignment: str | Path, kernel_id: str, kernel, launch: dict | None = None, **options) -> float:
    """Points for one Triton kernel, for an nbgrader test cell; raises `KernelFailed` unless it is correct."""
    if isinstance(kernel, TritonKernel) and kernel.is_stub:
        print(NOT_WRITTEN)
        raise KernelFailed(f"{kernel_id}: {NOT_WRITTEN}")
    return points(kernel_id, lambda: grade_triton(assignment, kernel_id, kernel, launch, **options))


_checked: dict[tuple, tuple[str, str]] = {}   # what `check` found, by kernel, source and launch (this process)
_lock = threading.Lock()


def _unwritten(kernel_id: str) -> str:
    return f"{kernel_id}: not written yet (its body is still the stub)"


def checked(assignment: str | Path, kernel_id: str, kernel, launch: dict | None = None) -> tuple[str, str]:
    """(``"✓"``, ``"✗"`` or ``"?"``, the line after it) for ``kernel`` run at the check shapes on public inputs, in
    a sandboxed child: on the GPU, or in Triton's interpreter on the CPU (see the module's docstring)."""
    try:
        source = kernel_from_function(kernel)
        spec = load_triton_spec(assignment)
        kernel_spec = spec.kernel(kernel_id)
        chosen = resolve_launch(spec.launches[kernel_id], launch)
    except (SpecError, TritonSourceError) as exc:
        return "✗", f"{kernel_id}: {exc}"
    if source.is_stub:
        return "✗", _unwritten(kernel_id)
    gpu = detect_gpu() is not None
    gap = getattr(problem(kernel_spec.kind, "triton"), "interpreter_gap", "")
    if gap and not gpu:
        return "?", f"{kernel_id}: not run on this machine's CPU: {gap}. The GPU worker checks it."
    shapes = [list(s) for s in kernel_spec.check_shapes if gpu or math.prod(s) <= PREVIEW_ELEMENTS]
    key = (str(assignment), kernel_id, source.source, repr(chosen), gpu)
    with _lock:
        if key in _checked:
            return _checked[key]
    request = {"spec_path": str(spec.assignment.path.resolve()), "kernel_id": kernel_id, "source": source.source,
               "launch": launch, "seed": PUBLIC_SEED, "mode": "check",
               "device": "cuda" if gpu else "cpu", "shapes": shapes}
    with process_session():   # on the CPU, a fork of the notebook's child (`forked`)
        child = run_child(CHILD, request, timeout_s=CHECK_TIMEOUT_S, env=_child_env(interpret=not gpu), gpu=gpu,
                          forked=not gpu)
    where = "on the GPU" if gpu else "in Triton's interpreter on this machine's CPU"
    if child.status != "ok" or "error" in child.answer:
        found = ("?", f"{kernel_id}: the check did not finish: "
                      f"{child.message or child.answer.get('error', '')}")
    elif child.answer["status"] != Status.OK:
        found = ("✗", f"{kernel_id}: {child.answer['message']} ({where})")
    else:
        sizes = "; ".join("x".join(map(str, s)) for s in shapes)
        found = ("✓", f"{kernel_id}: right at {sizes} on public inputs, {where}. Not the grade: correctness "
                      "at every size and speed are checked on the GPU worker.")
    with _lock:
        _checked[key] = found
    return found


def check(assignment: str | Path, kernel_id: str, kernel, launch: dict | None = None) -> None:
    """A kernel's check cell: one line (`checked`); never raises."""
    say_checked(kernel_id, lambda: checked(assignment, kernel_id, kernel, launch))


def assert_runs(assignment: str | Path, kernel_id: str, kernel, launch: dict | None = None) -> None:
    """The public part of a kernel's graded cell: `KernelFailed` where `check` says ✗."""
    assert_checked(kernel_id, lambda: checked(assignment, kernel_id, kernel, launch))
