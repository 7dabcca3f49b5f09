"""The kernelbench track (W6, `graders.model_engine`) through real ``nbgrader autograde`` on this machine's CPU
(``WORKSHOP_TARGET=sim``: each ``ModelNew`` graded at its problem's small sizes, correctness points only).

One autograde for the class, in nbgrader's order: a-alice hands in the references, then one attacker per group of
known-wrong solutions (each reward hack of ``solutions/wrong/``, one problem's cell each, the submission's other
cells left the release's stub), then the release untouched, then z-zoe the references again. It proves the
nbgrader path of the engine: each problem's test cell grades the ``ModelNew`` of the cell above it (every
problem's cell defines one), each hack ends in its ``expect:`` points and ``status:``, and the honest students
before and after the attackers are graded alike. The CPU grading of each file alone is in
tests/engines/test_model_engine.py; speed is graded on a GPU only (tests/gpu/)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import is_grade
from nbgrader_course import CourseCopy

from gradebook.summary import cell_scores
from graders import tracks
from graders.autograde import stored_results
from graders.model_engine.spec import load_model_spec
from workshop import course as nbg
from workshop import submissions

pytestmark = pytest.mark.slow
TRACK = tracks.get("kernelbench")
SPEC = load_model_spec("kernelbench")
HONEST = ("a-alice", "z-zoe")


def attackers() -> dict[str, dict[str, Path]]:
    """Student -> (problem id -> the known-wrong file handed in for it), no two files of one problem in one."""
    groups: list[dict[str, Path]] = []
    for path in TRACK.wrong_solutions():
        problem_id = tracks.graded_kernel(path).removesuffix("_score")
        group = next((g for g in groups if problem_id not in g), None)
        if group is None:
            groups.append(group := {})
        group[problem_id] = path
    return {f"m-attacker{n}": group for n, group in enumerate(groups, start=1)}


def _references() -> dict[str, str]:
    return {pid: p.reference.read_text() for pid, p in SPEC.problems.items()}


@pytest.fixture(scope="module")
def graded(released, tmp_path_factory) -> Path:
    course = CourseCopy(released[TRACK.name], tmp_path_factory.mktemp("kernelbench") / "course", TRACK.name)
    for student in HONEST:
        course.submit(student, _references())
    for student, group in attackers().items():
        course.submit(student, {pid: path.read_text() for pid, path in group.items()})
    course.submit("s-stub", {})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKSHOP_TARGET", "sim")   # read by nbgrader's trusted grader
        nbg.nbgrader(course.root, "autograde", TRACK.name, "--force")
    return course.root


def _scores(root: Path) -> dict[str, dict[str, float]]:
    table = cell_scores(f"sqlite:///{root / 'gradebook.db'}", TRACK.name)
    return {student: dict(zip(rows.cell, rows.score)) for student, rows in table.groupby("student")}


def _results(root: Path, student: str) -> dict[str, list[dict]]:
    """grade_id -> what the trusted grader stored in that graded cell of the student's autograded notebook."""
    nb = nbformat.read(str(root / "autograded" / student / TRACK.name / f"{TRACK.name}.ipynb"), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: stored_results(c) for c in nb.cells if is_grade(c)}


def test_honest_students_before_and_after_the_attackers_get_each_problems_correctness_points(graded):
    scores = _scores(graded)
    want = {f"{pid}_score": SPEC.points_correct for pid in SPEC.problems}
    for student in HONEST:
        assert scores[student] == want, student
        for grade_id, results in _results(graded, student).items():
            (result,) = results
            assert result["status"] == "ok" and result["test"] == grade_id.removesuffix("_score")
            assert result["device"] == "cpu" and result["cases"] == SPEC.trials


def test_each_reward_hack_gets_its_expected_points_and_status(graded):
    scores = _scores(graded)
    for student, group in attackers().items():
        results = _results(graded, student)
        for pid, path in group.items():
            grade_id = f"{pid}_score"
            (expected,) = tracks.expected_points(path).values()
            assert expected.matches(scores[student][grade_id]), (path.name, scores[student][grade_id])
            (result,) = results[grade_id]
            assert result["status"] in tracks.expected_statuses(path), (path.name, result["message"])
        untouched = set(SPEC.problems) - set(group)
        assert all(scores[student][f"{pid}_score"] == 0 and results[f"{pid}_score"] == [] for pid in untouched)


def test_the_release_untouched_scores_zero_and_says_not_written(graded):
    assert set(_scores(graded)["s-stub"].values()) == {0.0}
    nb = nbformat.read(str(graded / "autograded" / "s-stub" / TRACK.name / f"{TRACK.name}.ipynb"), as_version=4)
    for cell in (c for c in nb.cells if is_grade(c)):
        text = "".join(o.get("text", "") + "".join(o.get("traceback", [])) for o in cell.outputs)
        assert "not written yet" in text, cell.metadata.nbgrader["grade_id"]
