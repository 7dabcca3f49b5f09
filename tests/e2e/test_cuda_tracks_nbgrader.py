"""nbgrader and every CUDA track on a machine without a GPU: the released stubs compile and say they are not
written yet, and an autograde stops before anything runs and records no scores. (What a release holds is
tested for every track in tests/tracks/test_tracks.py.)"""
from __future__ import annotations

import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import is_grade, is_solution
from nbgrader_course import CourseCopy

from graders import tracks
from graders.cuda_engine.grade import check, check_compiles
from graders.notebook import CUDA_STUB
from workshop import course as nbg
from workshop import submissions

pytestmark = pytest.mark.slow
CUDA_TRACKS = [t for t in tracks.all_tracks() if t.engine == "cuda"]


@pytest.fixture(scope="module", params=CUDA_TRACKS, ids=lambda t: t.name)
def course(request, released, tmp_path_factory):
    """A copy of the track's course with its assignment generated (conftest.py's `released`)."""
    name = request.param.name
    return CourseCopy(released[name], tmp_path_factory.mktemp(f"{name}-course") / "course", name)


def test_every_released_stub_compiles_and_its_check_says_not_written_yet(course, capsys):
    """The release's kernel body is a C++ comment (nbgrader's stub for the notebook's language): it compiles,
    and its check says in one line that it is not written yet."""
    stubs = [c for c in course.release.cells if is_solution(c)]
    assert stubs
    for cell in stubs:
        kernel_id = cell.metadata.nbgrader["grade_id"]
        assert f"    {CUDA_STUB}\n}}" in cell.source
        namespace: dict = {}
        exec(cell.source, namespace)
        launch = {k: namespace[f"{kernel_id}_{k}"] for k in ("block", "tile") if f"{kernel_id}_{k}" in namespace}
        check_compiles(course.assignment, kernel_id, namespace[f"{kernel_id}_src"], **launch)
        capsys.readouterr()
        check(course.assignment, kernel_id, namespace[f"{kernel_id}_src"], **launch)
        assert capsys.readouterr().out == f"✗ {kernel_id}: not written yet (its body is still the stub's comment)\n"


def test_autograde_without_a_gpu_stops_and_records_no_scores(course, monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")   # inherited by nbgrader and its notebook kernel
    course.submit("cpu", submissions.cuda_answers(course.assignment))
    done = nbg.nbgrader(course.root, "autograde", course.assignment, "--student=cpu", "--force", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "needs a GPU worker" in output and "Nothing was graded" in output
    assert "Removing failed assignment" in output
    assert not (course.root / "autograded" / "cpu" / course.assignment).exists()
    # What lands in the gradebook: the submission and one grade per test cell, with no automatic score
    # (NULL, not 0) and flagged for manual grading; nbgrader's Grade.score reads that as 0, so a
    # re-run on a GPU worker (autograde --force) is what fills them in.
    graded = {c.metadata.nbgrader["grade_id"] for c in course.release.cells if is_grade(c)}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        grades = [g for nb in gb.find_submission(course.assignment, "cpu").notebooks for g in nb.grades]
        assert {g.name for g in grades} == graded
        assert all(g.auto_score is None and g.manual_score is None and g.needs_manual_grade for g in grades)
