"""Puzzle grading: ``check`` (the student's self-check), ``grade_correctness`` and ``grade_limits`` (the
hidden tests, see `graders.hidden_tests`: during ``nbgrader autograde`` the trusted grader calls them with
the kernel parsed from the submitted file).

Each call sends the kernel's source to a fresh child process (see `graders.sandbox.run`) with a wall-clock
limit, so a kernel that hangs, crashes or exhausts memory costs only its own puzzle. A failed hidden test
raises `PuzzleFailed` with a message the student can act on; nbgrader scores the cell 0. A passed one
prints to stdout only: nbgrader gives 0 to a test cell with *any* stderr output, and nothing from the
child (numba-cuda's warnings on a real GPU among it) reaches this process's stderr.

Targets: ``gpu`` runs correctness on the GPU and counts accesses in a second child on numba-cuda's
simulator; ``sim`` does both in one simulator child. ``WORKSHOP_TARGET`` forces one; by default the GPU is
used when one is found (`graders.gpu.detect_gpu`) and ``NUMBA_ENABLE_CUDASIM`` is not set.
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass

from graders.numba_engine import catalogue
from graders.gpu import detect_gpu
from graders.hidden_tests import hidden_test
from graders.numba_engine.kernel_source import KernelSourceError, SubmittedKernel, kernel_source
from graders.sandbox.run import run_child
from graders import settings

PUBLIC_SEED = 2024          # public checks use fixed inputs; hidden tests draw fresh ones every run
SIM_MEMORY_BYTES = 4 << 30  # address-space cap of a simulator child


class PuzzleFailed(AssertionError):
    """A puzzle's hidden test failed; the message says why."""


@dataclass
class Run:
    """What one child reported about one kernel on one set of cases."""

    target: str
    correct: bool
    message: str
    violations: list[str]
    cases: int


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


_runs: dict[tuple, Run] = {}
_run_locks: dict[tuple, threading.Lock] = {}   # one child per key, also when hidden tests run in threads


def _run(puzzle_id: str, kernel, mode: str, on: str) -> Run:
    """``kernel`` is a live ``@cuda.jit`` dispatcher (in a notebook) or a `SubmittedKernel` (trusted grader)."""
    if isinstance(kernel, SubmittedKernel):
        return run_source(puzzle_id, kernel.source, kernel.name, mode, on)
    try:
        source, name = kernel_source(kernel)
    except KernelSourceError as exc:
        return Run(on, False, str(exc), [], 0)
    return run_source(puzzle_id, source, name, mode, on)


def run_source(puzzle_id: str, source: str, name: str, mode: str, on: str) -> Run:
    """Grade kernel ``name`` defined in ``source`` on the ``mode`` cases, in a child on target ``on``."""
    key = (puzzle_id, source, name, mode, on)
    with _run_locks.setdefault(key, threading.Lock()):
        if key not in _runs:
            _runs[key] = _run_child(puzzle_id, source, name, mode, on)
    return _runs[key]


def _run_child(puzzle_id: str, source: str, name: str, mode: str, on: str) -> Run:
    puzzle = catalogue.get(puzzle_id)
    seed = PUBLIC_SEED if mode == "public" else int.from_bytes(os.urandom(8), "little")
    request = {"puzzle": puzzle.id, "source": source, "kernel_name": name, "mode": mode, "seed": seed,
               "target": on}
    result = run_child(
        "graders.numba_engine.child", request, timeout_s=timeout_s(),
        memory_bytes=SIM_MEMORY_BYTES if on == "sim" else None,
        env={"NUMBA_ENABLE_CUDASIM": "1" if on == "sim" else "0"}, gpu=on == "gpu",
    )
    if not result.ok:
        return Run(on, False, f"the kernel was {result.status}: {result.message}", [], 0)
    if "error" in result.answer and not result.answer.get("cases"):
        return Run(on, False, result.answer["error"], [], 0)
    cases = result.answer["cases"]
    failed = [c for c in cases if not c["correct"]]
    message = f"case {failed[0]['case']}: {failed[0]['message']}" if failed else ""
    violations = [v for c in cases for v in c["violations"]]
    return Run(on, not failed, message, violations, len(cases))


def _limits_run(puzzle_id: str, kernel, mode: str) -> Run:
    """Access counts always come from the simulator, also on a GPU worker."""
    return _run(puzzle_id, kernel, mode, "sim")


@hidden_test
def grade_correctness(puzzle_id: str, kernel) -> None:
    """Hidden test: correct on fresh random inputs at every hidden size, or `PuzzleFailed`."""
    run = _run(puzzle_id, kernel, "hidden", target())
    if not run.correct:
        raise PuzzleFailed(f"{puzzle_id}: {run.message}")
    print(f"{puzzle_id}: correct on {run.cases} hidden cases, run on {target_name(run.target)}")


@hidden_test
def grade_limits(puzzle_id: str, kernel) -> None:
    """Hidden test: a correct kernel within the puzzle's access limits, or `PuzzleFailed`."""
    run = _limits_run(puzzle_id, kernel, "hidden")
    if not run.correct:
        raise PuzzleFailed(f"{puzzle_id}: access limits are graded once the kernel is correct: {run.message}")
    if run.violations:
        raise PuzzleFailed(f"{puzzle_id}: over the access limits: " + "; ".join(run.violations))
    print(f"{puzzle_id}: within the access limits ({catalogue.get(puzzle_id).limits.describe()})")


def check(puzzle_id: str, kernel) -> bool:
    """The student's self-check on the public cases: prints the same messages as the hidden tests.

    Skipped while nbgrader autogrades (it sets ``NBGRADER_EXECUTION=autograde``): the hidden tests grade.
    """
    puzzle = catalogue.get(puzzle_id)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        print(f"{puzzle.title}: self-check skipped while autograding; the hidden tests below grade it.")
        return True
    run = _run(puzzle_id, kernel, "public", target())
    if not run.correct:
        print(f"✗ {puzzle.title}: {run.message}")
        return False
    limits = run if run.target == "sim" else _limits_run(puzzle_id, kernel, "public")
    print(f"✓ {puzzle.title}: correct on the {run.cases} public case(s) ({target_name(run.target)})")
    if not limits.correct:
        print(f"✗ access limits could not be counted in the simulator: {limits.message}")
        return False
    if limits.violations:
        print("✗ access limits: " + "; ".join(limits.violations))
        return False
    print(f"✓ access limits: {puzzle.limits.describe()}")
    print("  Hidden tests use fresh random inputs and more sizes.")
    return True
