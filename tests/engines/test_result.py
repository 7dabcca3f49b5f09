"""One result type and one status vocabulary for both engines; every hidden case reproducible from its seed."""
import json
import re
import typing

import numpy as np
import pytest

from graders import settings
from graders.cuda_engine import grade as cuda_grade
from graders.cuda_engine.spec import load_spec
from graders.numba_engine import catalogue, child as numba_child, grade as numba_grade
from graders.numba_engine.kernel_source import SubmittedKernel
from graders.result import NO_INPUTS, GradeResult, Status, hidden_seed
from graders.sandbox import run as sandbox
from graders.sandbox.run import ChildResult
from puzzle_cells import REFERENCE, run_cells

TRANSPOSE = load_spec("transpose")
MAP = "from numba import cuda\n\n\n@cuda.jit\ndef {name}(out, a, size):\n    i = cuda.threadIdx.x\n    {body}\n"


def map_source(body: str, name: str = "map_kernel") -> str:
    return MAP.format(name=name, body=body)


# --- the vocabulary covers what each engine emits -------------------------------------------------------

def test_every_sandbox_child_status_is_in_the_vocabulary():
    assert set(typing.get_args(sandbox.Status)) <= {s.value for s in Status}


NUMBA_ANSWERS = {   # map's kernel (out[i] = a[i] + 10) and what its child answers
    Status.OK: map_source("out[i] = a[i] + 10"),
    Status.INCORRECT: map_source("out[i] = a[i]"),
    Status.KERNEL_ERROR: map_source("raise NotImplementedError()"),
    Status.LIMITS: map_source("out[i] = a[i] + a[i] - a[i] + 10"),   # right values, three reads a thread
    Status.COMPILE_ERROR: map_source("out[i] = a[i] + 10", name="other_kernel"),
    Status.REFUSED: "import os\n" + map_source("out[i] = a[i] + 10"),
}


@pytest.mark.parametrize("status", list(NUMBA_ANSWERS), ids=str)
def test_numba_child_answers_with_a_status_of_the_vocabulary(status, monkeypatch):
    monkeypatch.setattr(numba_child, "_track_shared_memory", lambda: None)   # leave the simulator unpatched
    answer = numba_child.handle({"puzzle": "map", "source": NUMBA_ANSWERS[status], "kernel_name": "map_kernel",
                                 "mode": "hidden", "seed": 5, "target": "sim"})
    result = GradeResult.from_dict(json.loads(json.dumps(answer)))
    assert result.status == status and result.test == "map" and result.target == "sim", result.failure_line()
    if status != Status.OK:
        assert ("(hidden, seed 5)" in result.failure_line()) == (status not in NO_INPUTS)


def test_numba_out_of_bounds_write_on_the_gpu_is_its_own_status(monkeypatch):
    def guard_changed(*args):
        raise numba_child.OutOfBoundsWrite("out-of-bounds write to out[4] (shape (4,))")

    monkeypatch.setattr(numba_child, "_launch_on_gpu", guard_changed)
    puzzle = catalogue.get("map")
    kernel = run_cells(REFERENCE["map"])["map_kernel"]
    status, message, _ = numba_child._run_case(puzzle, kernel, puzzle.cases("hidden")[0],
                                               np.random.default_rng(0), "gpu")
    assert status == Status.OOB_WRITE and message == "the kernel made an out-of-bounds write to out[4] (shape (4,))"


CHILDREN_WITHOUT_ANSWER = {
    Status.TIMEOUT: ChildResult("timeout", message="stopped after 5 s"),
    Status.CRASHED: ChildResult("crashed", message="the grading process was killed by SIGKILL"),
    Status.GRADER_ERROR: ChildResult("ok", answer={"error": "KeyError: 'seed'"}),
}


@pytest.mark.parametrize("status", list(CHILDREN_WITHOUT_ANSWER), ids=str)
def test_numba_child_that_did_not_answer_keeps_its_seed(status, monkeypatch):
    monkeypatch.setenv("WORKSHOP_SEED", "77")
    monkeypatch.setattr(numba_grade, "run_child_unstarved", lambda *args, **kwargs: CHILDREN_WITHOUT_ANSWER[status])
    result = numba_grade._run_child("map", map_source("out[i] = a[i] + 10"), "map_kernel", "hidden", "sim")
    assert result.status == status and result.seed == 77
    assert result.failure_line().startswith(f"{status} (hidden, seed 77): ")


@pytest.mark.parametrize("status", typing.get_args(sandbox.Status))
def test_a_cuda_child_that_did_not_answer_scores_zero_and_keeps_its_seed(status):
    child = ChildResult(status, answer={"status": "incorrect", "message": "why"} if status == "ok" else {})
    result = cuda_grade.result_from_child(child, TRANSPOSE, TRANSPOSE.kernel("padded"), 10, seed=3)
    assert result.status == ("incorrect" if status == "ok" else status) and result.points == 0
    assert result.failure_line().startswith(f"{result.status} (hidden, seed 3): ")


@pytest.mark.parametrize("status", list(Status), ids=str)
def test_every_status_converts_from_a_cuda_childs_answer(status):
    child = ChildResult("ok", answer={"status": status.value, "message": "why", "seed": 3, "kernel_id": "padded",
                                      "checks": [{"ok": True}]})
    result = cuda_grade.result_from_child(child, TRANSPOSE, TRANSPOSE.kernel("padded"), 10, seed=3)
    assert result.status == status and result.test == "padded" and result.seed == 3 and result.cases == 1
    padded = TRANSPOSE.kernel("padded")
    assert result.points == (padded.points_correct if status in cuda_grade.SPEED_NOT_CREDITED else 0)
    assert result.max_points == padded.points
    assert set(result.details) == {"checks", "score", "curve", "seconds"}


def test_a_cuda_child_status_outside_the_vocabulary_is_an_error():
    child = ChildResult("ok", answer={"status": "failed", "message": ""})
    with pytest.raises(ValueError, match="'failed' is not a valid Status"):
        cuda_grade.result_from_child(child, TRANSPOSE, TRANSPOSE.kernel("padded"), 10, seed=3)


# --- the failure line ----------------------------------------------------------------------------------

def test_failure_line_names_the_case_and_the_seed_of_hidden_inputs():
    result = GradeResult("map", Status.INCORRECT, "out[2] = 0, expected 7", case="case 3 of 5", seed=1234567)
    assert result.failure_line() == "case 3 of 5 (hidden, seed 1234567): out[2] = 0, expected 7"
    assert GradeResult("map", Status.TIMEOUT, "stopped", seed=9).failure_line() == "timeout (hidden, seed 9): stopped"
    assert GradeResult("map", Status.INCORRECT, "x", case="case 1 of 2", hidden=False, seed=2024).failure_line() \
        == "case 1 of 2 (public): x"
    assert GradeResult("naive", Status.COMPILE_ERROR, "line 9: error", seed=9).failure_line() \
        == "compile_error: line 9: error"


def test_as_dict_is_flat_json_and_from_dict_reads_it_back():
    result = GradeResult("padded", Status.OK, seed=3, points=2.5, max_points=3.0, target="gpu",
                         details={"timing": {"ratio": 0.9}})
    flat = json.loads(json.dumps(result.as_dict()))
    assert flat["status"] == "ok" and flat["timing"] == {"ratio": 0.9} and flat["seed"] == 3
    assert GradeResult.from_dict(flat) == result


# --- seeds ---------------------------------------------------------------------------------------------

def test_workshop_seed_forces_the_seed_and_is_checked(monkeypatch):
    monkeypatch.delenv("WORKSHOP_SEED", raising=False)
    assert settings.forced_seed() is None and hidden_seed() != hidden_seed()
    monkeypatch.setenv("WORKSHOP_SEED", "1234567")
    assert hidden_seed() == 1234567
    for bad in ("-1", "abc", str(1 << 63)):
        monkeypatch.setenv("WORKSHOP_SEED", bad)
        with pytest.raises(ValueError, match="WORKSHOP_SEED"):
            settings.forced_seed()


def test_cuda_grading_sends_the_forced_seed_to_its_child(monkeypatch):
    requests = []

    def child(handler, request, **kwargs):
        requests.append(request)
        return ChildResult("timeout")

    monkeypatch.setenv("WORKSHOP_SEED", "4242")
    monkeypatch.setattr(cuda_grade, "require_gpu", lambda why: None)
    monkeypatch.setattr(cuda_grade, "run_child", child)
    result = cuda_grade.grade_kernel("transpose", "naive", "irrelevant", budget_s=1.0, timeout_s=2.0)
    assert requests[0]["seed"] == result.seed == 4242
    assert result.failure_line().startswith("timeout (hidden, seed 4242): your kernel did not finish within 2 s")


def test_a_failed_hidden_case_is_reproduced_exactly_from_the_seed_in_its_message(monkeypatch):
    """A TA copies the seed from a student's failure into WORKSHOP_SEED and sees the same case fail the same way."""
    kernel = SubmittedKernel(map_source("out[i] = a[i]"), "map_kernel")   # forgets the + 10

    def failure() -> str:
        monkeypatch.setattr(numba_grade, "_kept", {})   # a fresh grading, not the kept run
        with pytest.raises(numba_grade.PuzzleFailed) as failed:
            numba_grade.grade_correctness("map", kernel)
        return str(failed.value)

    monkeypatch.delenv("WORKSHOP_SEED", raising=False)
    first = failure()
    seed = int(re.search(r"\(hidden, seed (\d+)\)", first).group(1))
    monkeypatch.setenv("WORKSHOP_SEED", str(seed))
    assert failure() == first
    puzzle = catalogue.get("map")
    a, = puzzle.make_inputs(puzzle.cases("hidden")[0], np.random.default_rng(seed))
    assert first.startswith(f"Map: case 1 of {len(puzzle.cases('hidden'))} (hidden, seed {seed}): ")
    assert f"out[0] = {a[0]:g}, expected {a[0] + 10:g}" in first
