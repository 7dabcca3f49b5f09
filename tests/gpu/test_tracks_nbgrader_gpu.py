"""Every CUDA track autograded by nbgrader on a real GPU: the reference gets full marks, the untouched stub 0
with an error in each test cell, and each known-wrong solution exactly the points on its ``expect:`` line
(handed in together where they replace different kernels, the other kernels left as the stub has them, so that
a submission grades only what it is there to test). The timing budget per kernel is
``WORKSHOP_PERF_BUDGET_S`` (default here 1.5 s, not the spec's). Records seconds per submission and the
scores under benchmarks/results/<track>/ (``<track>-track-nbgrader-gpu-<date-time>.json``).
"""
from __future__ import annotations

import os

import pytest

from gradebook.summary import cell_scores
from graders import tracks
from graders.autograde import graded_cells, stored_results
from graders.cuda_engine import counters, grade
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from graders.ladder import rung_of
from workshop.course import Autograding, Course, nbgrader, stderr_text
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers, wrong_group_answers, wrong_groups

pytestmark = pytest.mark.gpu
CUDA_TRACKS = [t for t in tracks.all_tracks() if t.engine == "cuda"]


@pytest.fixture(scope="module", params=CUDA_TRACKS, ids=lambda t: t.name)
def grading(request, tmp_path_factory):
    track = request.param
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
        grading = Autograding(Course(tmp_path_factory.mktemp(f"{track.name}-gpu-course"), track.name))
        yield grading
        write_gpu_record(
            f"{track.name}-track-nbgrader-gpu",
            f"nbgrader autograde of the {track.name} track: reference, stub and its known-wrong solutions",
            {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
             "seconds_per_submission": grading.seconds, "scores": grading.scores}, dists=("nbgrader",),
            folder=track.name)


def max_points(grading: Autograding, student: str) -> dict[str, float]:
    """Each graded cell's maximum, from nbgrader's gradebook."""
    table = cell_scores(f"sqlite:///{grading.course.root / 'gradebook.db'}", grading.course.assignment)
    rows = table[table.student == student]
    return dict(zip(rows.cell, rows.max_score))


def test_reference_gets_full_marks(grading):
    scores = grading.grade("reference", cuda_answers(grading.course.assignment))
    for grade_id, outputs in grading.test_cell_outputs("reference").items():
        print(f"--- {grade_id}\n" + "".join(o.get("text", "") for o in outputs))
        assert not stderr_text(outputs), (grade_id, stderr_text(outputs))
    full = max_points(grading, "reference")
    assert scores and scores == full, {k: (scores.get(k), v) for k, v in full.items() if scores.get(k) != v}


def test_the_reference_feedback_shows_each_kernels_numbers_and_the_chart(grading):
    """Run after the reference is graded: `nbgrader generate_feedback` with the course's preprocessors."""
    course = grading.course
    nbgrader(course.root, "generate_feedback", course.assignment, "--student", "reference")
    page = (course.root / "feedback" / "reference" / course.assignment / f"{course.assignment}.html").read_text()
    kernels = load_spec(course.assignment).kernels
    assert page.count("workshop-timing") == len(kernels), page.count("workshop-timing")
    # the worklog's chart, and a table and chart for each kernel that is a rung of the abstraction ladder (CUTLASS's)
    rungs = sum(rung_of(course.assignment, kid) is not None for kid in kernels)
    assert page.count('src="data:image/png;base64,') == 1 + rungs
    assert page.count("workshop-ladder") == rungs
    # the precision table, where the track's kinds name their number format (the tensor-core worklog)
    formats = any(problem(k.kind).precision for k in kernels.values())
    assert page.count("workshop-precision") == (1 if formats else 0)


def test_the_references_sanitizer_findings_were_prepared_before_its_kernels_were_timed(grading):
    """Run after the reference is graded: each kernel that compute-sanitizer checked took the findings its test's
    preparation made before the submission's first kernel was timed (`graders.cuda_engine.grade.prepare`), none
    ran the tools between two timed kernels."""
    results = [r for cell in graded_cells(grading.course.autograded("reference")) for r in stored_results(cell)]
    checked = {r["test"]: r["sanitizer"] for r in results if r.get("sanitizer")}
    assert checked and all(found.get("prepared") for found in checked.values()), checked


def test_the_references_counts_were_prepared_and_match_ncus_count_alone(grading):
    """Run after the reference is graded: each kernel with a counter rule took the counts its test's preparation
    made (`graders.cuda_engine.grade.prepare`), ncu beside other kernels' compute-sanitizer runs; the count of the
    step it is compared with is the one ncu gives here, with nothing else on the GPU (to 0.1%: two counts of the
    mma reference alone differed by 0.01%)."""
    spec = load_spec(grading.course.assignment)
    results = [r for cell in graded_cells(grading.course.autograded("reference")) for r in stored_results(cell)]
    counted = {r["test"]: r["counter"] for r in results if r.get("counter")}
    if not any(k.counter for k in spec.kernels.values()):
        assert not counted
        return
    assert counted and all(found.get("prepared") for found in counted.values()), counted
    for found in counted.values():
        naive = spec.kernel(found["relative_to"])
        alone, _ = counters.reference_count({"spec_path": str(spec.path.resolve())}, naive, found["shape"],
                                            found["metric"], grade._child_env())
        assert abs(alone - found["reference"]) <= 0.001 * alone, (found, alone)


def test_untouched_stub_gets_zero_with_an_error_in_each_test_cell(grading):
    scores = grading.grade("stub", {})
    assert scores and not any(scores.values()), scores
    for grade_id, outputs in grading.test_cell_outputs("stub").items():
        assert not stderr_text(outputs), (grade_id, stderr_text(outputs))
        assert any(o.get("output_type") == "error" for o in outputs), (grade_id, outputs)


def test_each_known_wrong_solution_gets_its_expected_points(grading):
    track = tracks.get(grading.course.assignment)
    missed = {}
    for i, group in enumerate(wrong_groups(track.name)):
        scores = grading.grade(f"wrong{i}", wrong_group_answers(track.name, group))
        for path in group.values():
            for grade_id, expected in tracks.expected_points(path).items():
                if not expected.matches(scores[grade_id]):
                    missed[f"{path.name}: {grade_id}"] = (scores[grade_id], str(expected))
    assert not missed, missed
