"""nbgrader and every CUDA track on a machine without a GPU: the released stubs compile and say they are not
written yet, and an autograde stops before it touches a submission and records nothing. (What a release holds is
tested for every track in tests/tracks/test_tracks.py.)"""
from __future__ import annotations

import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import is_solution
from nbgrader_course import CourseCopy

from graders import tracks
from graders.cuda_engine.grade import check, check_compiles
from graders.cuda_engine.spec import load_spec
from graders.notebook import CUDA_STUB, EDIT_LANGUAGE
from workshop import course as nbg
from workshop import submissions
from workshop.fleet.isolated import INFRASTRUCTURE_MARKERS

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
    if course.release.metadata.kernelspec.language == EDIT_LANGUAGE:
        pytest.skip("its release keeps each kernel, sabotaged (tests/tracks/test_debugging.py)")
    kernels = load_spec(course.assignment).kernels   # (a track's questions are solution cells too: nvfp4's)
    stubs = [c for c in course.release.cells if is_solution(c) and c.metadata.nbgrader["grade_id"] in kernels]
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


def test_autograde_without_a_gpu_stops_in_one_line_and_records_nothing(course, monkeypatch):
    """Before nbgrader touches the submission: one line in its log (no traceback) and exit status 1; no submission
    in the gradebook (formgrader counts none) and an earlier autograded copy left as it was, for a re-run on a GPU
    worker. The line names NeedsGPUWorker, which a fleet worker reads as its own fault (retried elsewhere)."""
    monkeypatch.setenv("WORKSHOP_GPU", "0")   # inherited by nbgrader and its notebook kernel
    course.submit("cpu", submissions.cuda_answers(course.assignment))
    earlier = course.root / "autograded" / "cpu" / course.assignment / "earlier.txt"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("graded on a GPU worker before")
    done = nbg.nbgrader(course.root, "autograde", course.assignment, "--student=cpu", "--force", check=False)
    assert done.returncode == 1
    assert (done.stdout + done.stderr).splitlines() == [
        f"[AutogradeApp | ERROR] NeedsGPUWorker: Autograding {course.assignment} needs a GPU worker: no CUDA GPU was "
        "found on this machine. Nothing was graded; run the autograder on a machine with an NVIDIA GPU."]
    assert any(marker in done.stderr for marker in INFRASTRUCTURE_MARKERS)
    assert [p.name for p in earlier.parent.iterdir()] == ["earlier.txt"]
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        assert gb.find_student("cpu") and gb.assignment_submissions(course.assignment) == []
        assert gb.find_assignment(course.assignment).num_submissions == 0
