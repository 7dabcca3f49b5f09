"""The capstone track on the CPU: each reference (its pure-PyTorch path: the Triton kernels need a GPU) and each
known-wrong solution graded in a sandboxed child by the model engine at the problems' small sizes (the vendor
library's attention is graded by tests/e2e/test_leaderboard.py). Speed, and the Triton paths, are a GPU's to
grade."""
from __future__ import annotations

import pytest

from graders import tracks
from graders.model_engine.grade import grade_model
from graders.model_engine.source import ModelSource
from graders.model_engine.spec import load_model_spec
from graders.result import Status

TRACK = tracks.get("capstone")
SPEC = load_model_spec("capstone")
QUICK = {"device": "cpu", "trials": 3, "timed_runs": 3}   # the CPU path: tests only, its times mean nothing


@pytest.mark.parametrize("problem_id", sorted(SPEC.problems))
def test_each_reference_is_right_on_the_cpu(problem_id):
    result = grade_model("capstone", problem_id, ModelSource(SPEC.problem(problem_id).reference.read_text()), **QUICK)
    assert result.status == Status.OK, result.failure_line()
    assert result.cases == QUICK["trials"] and result.points == SPEC.points_correct   # no speed points on a CPU
    assert set(result.details["timing"]["speedup"]) == {"eager"}


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.name)
def test_each_known_wrong_solution_gets_its_expected_points(path):
    (grade_id, expected), = tracks.expected_points(path).items()
    result = grade_model("capstone", grade_id.removesuffix("_score"), ModelSource(path.read_text()), **QUICK)
    assert str(result.status) in tracks.expected_statuses(path), result.failure_line()
    assert expected.matches(result.points), (result.points, str(expected))
    assert "trial 1:" in result.message   # wrong from the first trial's inputs on
