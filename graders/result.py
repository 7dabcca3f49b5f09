"""What grading one kernel gives, in both engines: a `Status` from one vocabulary and a `GradeResult`.

The numba engine (`graders.numba_engine.grade`) and the CUDA C++ engine (`graders.cuda_engine.grade`) return
a `GradeResult`; `GradeResult.failure_line` renders what the student reads when it fails. Hidden inputs come
from a seed drawn once per grading (`hidden_seed`); the seed is recorded in the result and shown in every
failure that ran on inputs, so ``WORKSHOP_SEED=<seed>`` reproduces a failing hidden case exactly.

A hidden test `publish`es each result it grades; the trusted grader (`graders.autograde`) `collect`s them per
graded cell and stores them in the autograded notebook, where exports and feedback read them as data.
"""
from __future__ import annotations

import contextlib
import secrets
import threading
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Iterator

from graders import settings


class Status(StrEnum):
    """How grading one kernel ended. Each value is also the word students and records see."""

    OK = "ok"                        # correct (and, for a puzzle, within its access limits)
    INCORRECT = "incorrect"          # ran, but an output value is wrong or never written
    KERNEL_ERROR = "kernel_error"    # a numba kernel raised while it ran (bad index, untouched stub, ...)
    OOB_WRITE = "oob_write"          # wrote outside its output (a guard region changed)
    LIMITS = "limits"                # correct, but over the puzzle's global-access limits
    IMPLAUSIBLE = "implausible"      # correct, but timed faster than the hardware can do the work: no speed
    UNMET = "unmet"                  # a requirement is not met (SASS, the autotuning search, a counter's bound)
    COMPILE_ERROR = "compile_error"  # the source does not compile (CUDA C++) or does not define the kernel
    REFUSED = "refused"              # not run: outside the numba kernel subset, or a launch the rules forbid
    TIMEOUT = "timeout"              # the grading child did not finish within its time limit
    CRASHED = "crashed"              # the grading child died, or the CUDA context was lost
    NO_GPU = "no_gpu"                # the grading child found no GPU
    GRADER_ERROR = "grader_error"    # the grader itself failed: not the kernel's fault


# Outcomes reached before any input was made: their failure line names no seed.
NO_INPUTS = frozenset({Status.REFUSED, Status.COMPILE_ERROR, Status.NO_GPU})


@dataclass(frozen=True)
class GradeResult:
    """One kernel graded on one set of cases."""

    test: str                        # the puzzle id or the kernel id
    status: Status
    message: str = ""                # what went wrong, for the student ('' when ok)
    case: str = ""                   # the failing case, e.g. "case 3 of 5"; '' when not one case's fault
    cases: int = 0                   # cases run
    hidden: bool = True              # hidden inputs (from ``seed``), or the fixed public ones
    seed: int | None = None          # the seed the inputs were drawn from
    points: float | None = None      # None: all or nothing, as the test cell's points decide
    max_points: float | None = None
    target: str = ""                 # where it ran: "gpu" or "sim"
    details: dict[str, Any] = field(default_factory=dict)   # the engine's measurements (timing, checks, ...)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def failure_line(self) -> str:
        """What the student reads, e.g. ``case 3 of 5 (hidden, seed 1234567): out[2] = 0, expected 7``.

        Starts with the failing case, or the status when no one case failed; names the seed of hidden
        inputs whenever the kernel ran on them."""
        head = self.case or str(self.status)
        if self.status in NO_INPUTS or (self.hidden and self.seed is None):
            inputs = ""
        else:
            inputs = f" (hidden, seed {self.seed})" if self.hidden else " (public)"
        return f"{head}{inputs}: {self.message}" if self.message else head + inputs

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields, with ``details`` merged in at the top level."""
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        return self.details | plain | {"status": str(self.status)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradeResult:
        """The inverse of `as_dict`: keys that are no field go back into ``details``."""
        names = {f.name for f in fields(cls)} - {"details"}
        known = {k: v for k, v in data.items() if k in names}
        return cls(**known | {"status": Status(data["status"])},
                   details={k: v for k, v in data.items() if k not in names})


def hidden_seed() -> int:
    """The seed of one grading's hidden inputs: ``WORKSHOP_SEED`` when set, else a fresh random one."""
    forced = settings.forced_seed()
    return forced if forced is not None else secrets.randbits(63)


_collecting = threading.local()


def publish(result: GradeResult) -> None:
    """Hand ``result`` to the `collect` block running on this thread; nothing happens outside one."""
    results = getattr(_collecting, "results", None)
    if results is not None:
        results.append(result)


@contextlib.contextmanager
def collect() -> Iterator[list[GradeResult]]:
    """The results `publish`ed on this thread while the block runs."""
    _collecting.results = results = []
    try:
        yield results
    finally:
        _collecting.results = None
