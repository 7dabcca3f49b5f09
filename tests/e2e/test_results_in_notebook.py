"""What each graded cell's hidden test graded is stored in the autograded notebook as data, by the trusted
grader only (real nbgrader autograde on the simulator)."""
from __future__ import annotations

import nbformat
import pytest
from nbgrader.utils import is_grade, is_solution
from nbgrader_course import CourseCopy

from graders.numba_engine import catalogue
from workshop import submissions
from workshop.course import Course, nbgrader

pytestmark = pytest.mark.slow
FORGED = {"results": [{"test": "zip", "status": "ok", "points": 99.0, "target": "gpu"}]}


@pytest.fixture(scope="module")
def course(released_puzzles, tmp_path_factory) -> Course:
    return CourseCopy(released_puzzles.root, tmp_path_factory.mktemp("results") / "course")


@pytest.fixture(scope="module")
def graded(course) -> dict[str, list[dict]]:
    """A submission with a wrong zip and a pooling kernel over its limits, every cell's metadata forged."""
    answers = submissions.reference_answers() | submissions.wrong_answers("zip_subtracts", "pooling_global_reads")
    path = course.submit("forger", answers)
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        cell.metadata["workshop"] = FORGED
    nbformat.write(nb, str(path))
    course.autograde("forger")
    return {c.metadata.nbgrader["grade_id"]: c.metadata["workshop"]["results"]
            for c in course.autograded("forger").cells if is_grade(c) and not is_solution(c)}


def test_every_graded_cell_holds_its_own_results_not_the_forged_ones(graded):
    assert len(graded) == 2 * len(catalogue.PUZZLES)
    for grade_id, results in graded.items():
        assert len(results) == 1 and results[0]["test"] == grade_id.rsplit("_", 1)[0], (grade_id, results)
        assert results[0]["target"] == "sim" and results[0].get("points") != 99.0


def test_the_results_say_what_was_wrong_with_the_seed_to_replay_it(graded):
    (zip_run,) = graded["zip_correct"]
    assert zip_run["status"] == "incorrect" and zip_run["hidden"] and isinstance(zip_run["seed"], int)
    assert zip_run["message"]
    (pooling,) = graded["pooling_limits"]
    assert pooling["status"] == "limits"
    assert [r["status"] for r in graded["map_correct"] + graded["map_limits"]] == ["ok", "ok"]


def test_nbgrader_feedback_runs_the_performance_preprocessor(course, graded):
    """`nbgrader generate_feedback` with the course's preprocessors: puzzles time nothing, so no tables."""
    nbgrader(course.root, "generate_feedback", "puzzles", "--student", "forger")
    page = (course.root / "feedback" / "forger" / "puzzles" / "puzzles.html").read_text()
    assert "zip" in page and "workshop-timing" not in page and 'src="data:image/png' not in page
    # its summary names each graded cell (gradebook.feedback.FeedbackExporter), where nbgrader's says "Test cell"
    assert '<a href="#zip_correct">Puzzle 2: Zip — correct on fresh inputs and more sizes</a>' in page
    assert "Test cell" not in page
