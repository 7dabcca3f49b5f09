"""Grading a prediction (`predict`, the hidden test), checking its form (`check_prediction`, the graded cell's public
part) and the worker's measurement (`worker_measurement`), made once per grading process.

The key (``key.py``: each operation's regime, FLOPs and bytes, the reference answers, and ``model`` and
``figures``, which give the key's times on any GPU's figures: `translation`) is read in the trusted grader's
process only, as a quiz's is (`graders.quiz_engine`). The measurement involves no student input: it is
made in a sandboxed GPU child the first time a process grades the track and reused for every submission that
process grades (`nbgrader autograde roofline`: the whole class against one measurement); torch and CUDA stay out
of nbgrader's process.
"""
from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
import threading
import tomllib
from types import ModuleType

from graders import settings, tracks
from graders.gpu import require_gpu
from graders.hidden_tests import TestFailed, hidden_test
from graders.quiz_engine.grade import AnswerFailed
from graders.result import GradeResult, Status, publish
from graders.roofline_engine import scoring
from graders.roofline_engine.operations import Operation, form_problem
from graders.sandbox.run import run_child
from graders.sandbox.starvation import refuse_starved

CHILD = "graders.roofline_engine.child"
KEY_FILE = "key.py"
STARTUP_S = 90.0   # the child's start: the sandbox, torch, CUDA, the inputs, the warm-up


class MeasurementFailed(TestFailed):
    """The worker's measurement failed (the grader's fault, not the answer's); the message says how."""


def operation(assignment: str, op_id: str) -> Operation:
    """The operation ``op_id`` of the roofline track ``assignment`` (its ``problem.py``'s ``OPERATIONS``)."""
    found = {op.id: op for op in tracks.get(assignment).problem_module().OPERATIONS}
    if op_id not in found:
        raise KeyError(f"{assignment} has no operation {op_id!r}")
    return found[op_id]


def spec(assignment: str) -> dict:
    """The track's whole spec.toml."""
    return tomllib.loads(tracks.get(assignment).spec_path.read_text())


@functools.cache
def key(assignment: str) -> ModuleType:
    """The track's ``key.py`` (``WORK``, ``KEY``): on a grading worker only, never in the student kit or a sandbox."""
    path = settings.TRACKS / assignment / KEY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the track's key is not on this machine (a grading worker's copy holds "
                                "it; a student's does not)")
    spec_ = importlib.util.spec_from_file_location(f"tracks.{assignment}.key", path)
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module
    spec_.loader.exec_module(module)
    return module


def reference_answer(assignment: str, op_id: str) -> dict:
    """The key's answer to ``op_id``, as the source notebook's solution cell holds it."""
    return key(assignment).KEY[op_id]


def _form(op_id: str, answer) -> None:
    if why := form_problem(op_id, answer):
        raise AnswerFailed(why)


def check_prediction(assignment: str, op_id: str, answer) -> None:
    """The graded cell's public part: ``answer`` is written and of the right form (all ``nbgrader validate`` can
    tell without the GPU worker); `AnswerFailed` otherwise."""
    operation(assignment, op_id)
    _form(op_id, answer)
    print(f"✓ {op_id}: answered {answer!r} (graded against the worker's measurement once you hand it in)")


def translation(assignment: str, op_id: str, w: scoring.Worker) -> float:
    """What a measurement of ``op_id`` on worker ``w`` is multiplied by to stand for one on the course's reference GPU,
    whose figures the student predicts with: the key's time there over the key's time on ``w``'s own figures
    (bandwidth, peaks, both launch figures as measured). 1 where the key cannot say (a peak the grader does not
    know for this GPU)."""
    k = key(assignment)
    on_worker = k.model(k.figures(w))[op_id]["time_us"]
    return k.WORK[op_id]["time_us"] / on_worker if math.isfinite(on_worker) and on_worker > 0 else 1.0


_measured: dict[str, dict] = {}
_measuring = threading.Lock()


def worker_measurement(assignment: str) -> dict:
    """The child's measurement of every operation of ``assignment`` on this worker's GPU (`graders.roofline_engine.
    child.handle`), made once per process; `MeasurementFailed` when the child fails (not kept: the next call tries
    again), `graders.sandbox.starvation.WorkerStarved` when the worker starved it."""
    with _measuring:
        if assignment not in _measured:
            _measured[assignment] = measure(assignment)
        return _measured[assignment]


def measure(assignment: str) -> dict:
    """One measurement of every operation of ``assignment``, by a fresh grading child (see `worker_measurement`)."""
    top = tracks.get(assignment).assignment
    budget = settings.perf_budget_s(float(top["budget_s"]))
    limit = budget + STARTUP_S
    path = os.environ.get("PYTHONPATH", "")
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(settings.PACKAGE_ROOT), path) if p)}
    child = run_child(CHILD, {"assignment": assignment, "budget_s": budget}, timeout_s=limit, gpu=True, env=env)
    if child.status == "timeout":
        refuse_starved(child, limit)
        raise MeasurementFailed(f"the grader failed: its measurement did not finish within {limit:g} s")
    if child.status == "crashed":
        raise MeasurementFailed(f"the grader failed: its measuring process died: {child.message}")
    if "error" in child.answer:
        raise MeasurementFailed(f"the grader failed: {child.answer['error']}")
    return child.answer


@hidden_test(alone=True)
def predict(assignment: str, op_id: str, answer) -> float:
    """The hidden test of one operation: its points (regime, intensity, time against the worker's measurement,
    translated to the reference GPU: `translation`), or
    `AnswerFailed` for an answer not written or of the wrong form. Without a GPU `graders.gpu.NeedsGPUWorker`: the
    trusted grader stops the submission instead of recording zeros. Runs alone (`hidden_test(alone=True)`): the
    first call of a process measures, with nothing else running on the worker."""
    op = operation(assignment, op_id)
    require_gpu(f"Grading {assignment}")
    rules = scoring.Rules.from_spec(tracks.get(assignment).assignment)
    try:
        _form(op_id, answer)
    except AnswerFailed as failed:
        publish(GradeResult(op_id, Status.INCORRECT, str(failed), max_points=rules.max_points, target="gpu"))
        raise
    measurement = worker_measurement(assignment)
    figures = spec(assignment)
    w = scoring.worker(measurement, figures["reference_gpu"], figures.get("datasheet_peaks"))
    graded = scoring.grade(op, answer, key(assignment).WORK[op_id], measurement["operations"][op_id], w, rules,
                           scale=translation(assignment, op_id, w))
    status = Status.OK if graded.points == rules.max_points else Status.INCORRECT
    publish(GradeResult(op_id, status, "" if status == Status.OK else "not every part right",
                        points=graded.points, max_points=rules.max_points, target="gpu",
                        details={"roofline": graded.as_dict(), "worker": w.as_dict(),
                                 "environment": measurement["environment"]}))
    print(scoring.report(op, graded, w, rules))
    sys.stdout.flush()
    return graded.points
