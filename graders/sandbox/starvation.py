"""A grading child stopped at its wall-clock limit because the worker was too busy to run it is the worker's fault,
never the student's 0.

At its deadline a child's supervisor has reported what the machine gave its sandbox (`graders.sandbox.run.UsageFile`):
its CPU seconds (user and system, all its processes) and its seconds ready to run but waiting for a CPU; the rest
of its time it slept (blocked on a lock, a pipe, the GPU). The child was **starved** (`starved`) when it ran less
than `SHARE` of its limit and spent at least as long waiting for a CPU as asleep. Then it runs once more with
`RETRY_FACTOR` times the limit (`run_child_unstarved`), still held to `SHARE` of the first limit; starved again,
grading stops with `WorkerStarved`, which the trusted grader treats as it treats a worker without a GPU or a
sandbox (`graders.autograde`): one line in the autograde log, nothing recorded. Any other timeout is the kernel's.

Why CPU time and waiting, both:

- a kernel that loops in numba-cuda's simulator computes all the time: the simulator runs a block's threads under
  the GIL while its block manager polls them in a busy loop, so even threads stuck at a barrier spend CPU. On an
  idle worker its CPU seconds match its wall seconds; given `SHARE` of its limit in CPU, its timeout is its own,
  however busy the worker was. An honest reference needs a few CPU seconds, far under `SHARE` of the 30 s limit.
- a kernel that hangs on the GPU leaves the host thread in a CUDA synchronize or copy. With CUDA's default
  scheduling (one context and fewer contexts than cores: spin) that thread spins, so it too spends CPU like a
  loop. Under blocking synchronisation (or a yield, on an idle machine) it sleeps: little CPU, but asleep rather
  than waiting for a CPU, so it is not starved and the timeout is the kernel's. CPU time alone would call every
  such hang starved, and a hanging kernel would never be graded.
- a child the worker starves was ready to run all along: little CPU, and the rest of its time waiting for one.

Waits are the sandbox's own CPU pressure where its cgroup has one (cgroup v2), else the machine's (any task
waiting: a busy machine); where neither is measured, CPU time alone decides, and a GPU hang is still the kernel's
through CUDA's spin. A child whose CPU time is unknown is never called starved. A kernel cannot make its own
child look starved: for a task of its sandbox to wait for a CPU every core must be busy, and cores kept busy by its
own tasks are its own CPU time, more than its whole limit.
"""
from __future__ import annotations

import dataclasses

from graders.sandbox.run import ChildResult, run_child

SHARE = 0.5        # of its limit: the CPU seconds after which a child's timeout is the kernel's, however busy the worker
RETRY_FACTOR = 3   # a starved child's second run gets this many times its limit


class WorkerStarved(RuntimeError):
    """The worker was too busy to give a grading child its time, on a longer second run too: the submission is not
    graded here (nothing is recorded for it) and is graded again when the worker is less busy."""

    def __init__(self, limit_s: float, *runs: ChildResult):
        self.runs = runs
        told = "; then ".join(_account(run) for run in runs)
        super().__init__(f"the worker was too busy to run a grading child whose limit is {limit_s:g} s: {told}. "
                         "Nothing was graded or recorded: grade it again when the worker is less busy")


def _account(run: ChildResult) -> str:
    waited = "its waits for a CPU are not measured here" if run.waited_s is None else (
        f"it waited {run.waited_s:.1f} s for a CPU")
    return f"stopped after {run.seconds:.1f} s having run {run.cpu_s:.1f} s of CPU ({waited})"


def starved(child: ChildResult, limit_s: float) -> bool:
    """Whether ``child`` was stopped at its wall-clock limit because the worker starved it (see the module
    docstring): less than `SHARE` x ``limit_s`` seconds of CPU, and at least half of the rest of its time waiting
    for a CPU (where waits are measured), both as its supervisor last observed them. False for any other outcome,
    and where its CPU time is unknown."""
    if child.status != "timeout" or child.cpu_s is None or child.cpu_s >= SHARE * limit_s:
        return False
    observed = child.seconds if child.observed_s is None else child.observed_s   # what the report covers
    return child.waited_s is None or child.waited_s >= (observed - child.cpu_s) / 2


def refuse_starved(child: ChildResult, limit_s: float) -> None:
    """`WorkerStarved` when the worker starved ``child`` at its limit ``limit_s`` (`starved`), for a grading that is
    not run again: the worker's fault, not the kernel's, and nothing is recorded."""
    if starved(child, limit_s):
        raise WorkerStarved(limit_s, child)


def run_child_unstarved(handler: str, request: dict, *, timeout_s: float, **options) -> ChildResult:
    """`graders.sandbox.run.run_child`, run once more with `RETRY_FACTOR` x ``timeout_s`` when the worker starved
    it; `WorkerStarved` when it starved that run too. A timeout it returns is the kernel's; a second run says so
    in ``rerun`` (and, timed out, in its message)."""
    first = run_child(handler, request, timeout_s=timeout_s, **options)
    if not starved(first, timeout_s):
        return first
    second = run_child(handler, request, timeout_s=RETRY_FACTOR * timeout_s, **options)
    if starved(second, timeout_s):
        raise WorkerStarved(timeout_s, first, second)
    message = second.message
    if second.status == "timeout":
        message += (f" (a second run, given {RETRY_FACTOR} x its {timeout_s:g} s limit: the worker was too busy "
                    "during the first)")
    return dataclasses.replace(second, message=message, rerun=f"the worker was too busy during a first run: "
                               f"{_account(first)}")
