"""Grading TileLang kernels for correctness and speed: the parent side, and what notebooks call.

- `grade_tilelang` sends one kernel (its builder's source as read from its cell,
  `graders.tilelang_engine.kernel_source`) to a fresh `graders.tilelang_engine.child` process on the GPU, with a
  wall-clock limit that also bounds TileLang's compile, and returns a `graders.result.GradeResult` as the CUDA C++
  engine does (`graders.cuda_engine.grade.result_from_child`: status, points, seed, the child's measurements).
- `score_tilelang` is the hidden test (`graders.hidden_tests`): the report, and the points or `KernelFailed`.
- `check` is a kernel's check cell: one line, ✓, ✗ or ?, never a traceback. On the GPU it runs the kernel at
  the check shapes on public inputs in a sandboxed child; without one, the child only compiles it (TileLang
  lowers it to CUDA C++ for the grading GPU's architecture: ✗ for a kernel that does not compile, else ? with
  what it compiled to). `assert_runs`, the public part of a graded cell, raises where `check` says ✗, so that
  ``nbgrader validate`` fails on it. Neither is the grade.

``WORKSHOP_PERF_BUDGET_S`` replaces the spec's ``time_budget_s`` as in the CUDA C++ engine.
"""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from graders import settings
from graders.cuda_engine.grade import KernelFailed, assert_checked, child_phases, points, result_from_child, say_checked
from graders.cuda_engine.grade import _child_env as cuda_child_env
from graders.cuda_engine.scoring import score_kernel
from graders.cuda_engine.spec import SpecError
from graders.gpu import detect_gpu, require_gpu
from graders.hidden_tests import NOT_WRITTEN, hidden_test
from graders.ladder import lines_of_code
from graders.result import GradeResult, Status, hidden_seed
from graders.sandbox.run import run_child
from graders.tilelang_engine.kernel_source import TileLangKernel, TileLangSourceError, kernel_from_function
from graders.tilelang_engine.spec import load_tilelang_spec

CHILD = "graders.tilelang_engine.child"
STARTUP_S = 180.0        # child start: torch and tilelang imports, CUDA start, TileLang's compile (nvcc), checks
CHECK_TIMEOUT_S = 180.0
PUBLIC_SEED = 0          # the check cell's inputs
CACHE_DIR = "/tmp/tilelang-cache"   # in the child's private /tmp


def _child_env() -> dict[str, str]:
    return cuda_child_env() | {"TILELANG_CACHE_DIR": CACHE_DIR}


def grade_tilelang(assignment: str | Path, kernel_id: str, kernel, *, budget_s: float | None = None,
                   timeout_s: float | None = None, memory_fraction: float = 0.25) -> GradeResult:
    """Compile, check and time one TileLang kernel in a sandboxed GPU child; ``details["phases"]`` as the CUDA
    C++ engine's (the child's own and ``child_start``); ``details["lines_of_code"]`` as `graders.ladder.lines_of_code`
    counts."""
    spec = load_tilelang_spec(assignment)
    kernel_spec = spec.kernel(kernel_id)
    try:
        source = kernel_from_function(kernel)
    except TileLangSourceError as exc:
        score = score_kernel(kernel_spec, False, None)
        return GradeResult(kernel_id, Status.REFUSED, str(exc), points=0.0, max_points=score.max, target="gpu",
                           details={"score": score.as_dict()})
    if spec.requires_gpu:
        require_gpu(f"Grading {spec.name}/{kernel_id}")
    budget = budget_s if budget_s is not None else settings.perf_budget_s(spec.time_budget_s)
    seed = hidden_seed()
    request = {"spec_path": str(spec.path.resolve()), "kernel_id": kernel_id, "source": source.source,
               "budget_s": budget, "memory_fraction": memory_fraction, "seed": seed, "mode": "grade",
               "launch_timeout_s": settings.launch_timeout_s()}
    limit = timeout_s if timeout_s is not None else budget + STARTUP_S
    child = run_child(CHILD, request, timeout_s=limit, env=_child_env(), gpu=True)
    result = result_from_child(child, spec, kernel_spec, limit, seed)
    return dataclasses.replace(result, details=result.details | {"phases": child_phases(result, child),
                                                                 "lines_of_code": lines_of_code(source.source, "#")})


@hidden_test(alone=True)
def score_tilelang(assignment: str | Path, kernel_id: str, kernel, **options) -> float:
    """Points for one TileLang kernel, for an nbgrader test cell; raises `KernelFailed` unless it is correct."""
    if isinstance(kernel, TileLangKernel) and kernel.is_stub:
        print(NOT_WRITTEN)
        raise KernelFailed(f"{kernel_id}: {NOT_WRITTEN}")
    return points(kernel_id, lambda: grade_tilelang(assignment, kernel_id, kernel, **options))


_checked: dict[tuple, tuple[str, str]] = {}   # what `check` found, by kernel and source (this process)
_lock = threading.Lock()


def _compiled(found: dict) -> str:
    uses = [name for name, used in (("TMA loads", found["tma"]), ("wgmma", found["wgmma"])) if used]
    return (f"TileLang {found['tilelang']} compiled it to {found['cuda_lines']} lines of CUDA C++ for "
            f"{found['arch']}" + (f" ({', '.join(uses)})" if uses else ""))


def checked(assignment: str | Path, kernel_id: str, kernel) -> tuple[str, str]:
    """(``"✓"``, ``"✗"`` or ``"?"``, the line after it) for ``kernel`` at the check shapes on public inputs on the
    GPU, or only compiled where there is none (see the module's docstring), in a sandboxed child."""
    try:
        source = kernel_from_function(kernel)
        kernel_spec = load_tilelang_spec(assignment).kernel(kernel_id)
    except (SpecError, TileLangSourceError) as exc:
        return "✗", f"{kernel_id}: {exc}"
    if source.is_stub:
        return "✗", f"{kernel_id}: not written yet (its body is still the stub)"
    gpu = detect_gpu() is not None
    key = (str(assignment), kernel_id, source.source, gpu)
    with _lock:
        if key in _checked:
            return _checked[key]
    spec = load_tilelang_spec(assignment)
    shapes = [list(s) for s in kernel_spec.check_shapes]
    request = {"spec_path": str(spec.path.resolve()), "kernel_id": kernel_id, "source": source.source,
               "seed": PUBLIC_SEED, "mode": "check", "device": "cuda" if gpu else "cpu", "shapes": shapes}
    child = run_child(CHILD, request, timeout_s=CHECK_TIMEOUT_S, env=_child_env(), gpu=gpu)
    answer = child.answer
    if child.status != "ok" or "error" in answer:
        found = ("?", f"{kernel_id}: the check did not finish: {child.message or answer.get('error', '')}")
    elif answer["status"] != Status.OK:
        found = ("✗", f"{kernel_id}: {answer['message']}" + (" (on the GPU)" if gpu else ""))
    elif not gpu:
        found = ("?", f"{kernel_id}: {_compiled(answer['compile'])}; not run: this machine has no GPU. The GPU "
                      "worker checks and times it.")
    else:
        sizes = "; ".join("x".join(map(str, s)) for s in shapes)
        found = ("✓", f"{kernel_id}: right at {sizes} on public inputs, on the GPU. Not the grade: correctness "
                      "on fresh inputs and speed are checked on the GPU worker.")
    with _lock:
        _checked[key] = found
    return found


def check(assignment: str | Path, kernel_id: str, kernel) -> None:
    """A kernel's check cell: one line (`checked`); never raises."""
    say_checked(kernel_id, lambda: checked(assignment, kernel_id, kernel))


def assert_runs(assignment: str | Path, kernel_id: str, kernel) -> None:
    """The public part of a kernel's graded cell: `KernelFailed` where `check` says ✗."""
    assert_checked(kernel_id, lambda: checked(assignment, kernel_id, kernel))
