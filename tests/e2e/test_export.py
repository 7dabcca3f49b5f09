"""``workshop export`` against the gradebook of a class of three (reference, untouched stub, two mistakes)
autograded by real nbgrader on the simulator, and against nbgrader's own ``nbgrader export`` CSV."""
from __future__ import annotations

import pandas as pd
import pytest
from nbgrader.api import Gradebook
from nbgrader_course import GRADED, CourseCopy

from graders.numba_engine import catalogue
from graders.result import GradeResult, Status
from workshop import cli, submissions
from workshop import course as nbg
from workshop.export import never_released, performance

NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                    "raw_score", "late_submission_penalty", "score", "max_score"]
CLASS = {**GRADED, "partial": submissions.wrong_answers("zip_subtracts", "pooling_global_reads")}


@pytest.fixture(scope="module")
def exported(graded_puzzles, tmp_path_factory):
    course = CourseCopy(graded_puzzles, tmp_path_factory.mktemp("export") / "course")   # GRADED autograded
    course.submit("partial", CLASS["partial"])
    course.autograde("partial")
    course.add_student("absent", "Absent", "Test")   # handed nothing in
    nbg.nbgrader(course.root, "export", "--to=grades.csv")
    assert cli.main(["export", "--course", str(course.root), "--to", "detail.csv"]) == 0
    read = {"dtype": {"student_id": str}, "keep_default_na": False}
    return (course, pd.read_csv(course.root / "grades.csv", **read),
            pd.read_csv(course.root / "detail.csv", **read).set_index("student_id", drop=False).rename_axis(None))


@pytest.mark.slow
def test_one_row_per_student_with_nbgrader_columns_first_and_equal(exported):
    _, grades, detail = exported
    assert list(detail.columns[:len(NBGRADER_COLUMNS)]) == NBGRADER_COLUMNS == list(grades.columns)
    assert sorted(detail.index) == sorted(grades.student_id) == sorted([*CLASS, "absent"])
    mine = detail[NBGRADER_COLUMNS].sort_values("student_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, grades.sort_values("student_id").reset_index(drop=True))


@pytest.mark.slow
def test_points_per_graded_cell_match_the_gradebook(exported):
    course, _, detail = exported
    cells = [f"{p.id}_{part}" for p in catalogue.PUZZLES for part in ("correct", "limits")]
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for student in CLASS:
            grades = {g.name: g.score for nb in gb.find_submission("puzzles", student).notebooks for g in nb.grades}
            assert sorted(grades) == sorted(cells)
            assert {c: float(detail.loc[student, c]) for c in cells} == grades
            assert sum(grades.values()) == float(detail.loc[student, "raw_score"])
    assert detail.loc["reference", cells].astype(float).sum() == 3 * len(catalogue.PUZZLES)
    assert detail.loc["stub", cells].astype(float).sum() == 0
    partial = detail.loc["partial"]
    assert float(partial["zip_correct"]) == 0 and float(partial["pooling_limits"]) == 0
    assert float(partial["pooling_correct"]) == 2 and float(partial["map_correct"]) == 2
    assert (detail.loc["absent", cells] == "").all()   # no submission: nbgrader's row, no cells


@pytest.mark.slow
def test_graded_on_the_simulator_and_no_timed_kernels(exported):
    _, _, detail = exported
    assert list(detail.loc[list(CLASS), "gpu"]) == ["simulator"] * len(CLASS)
    assert not [c for c in detail.columns if c.endswith(("_ratio", "_ms", "/s"))]


def test_performance_columns_from_a_cuda_kernels_results():
    """The columns of a timed kernel come from the results the trusted grader stored in its graded cell."""
    timing = {"work_unit": "FLOP", "ratio": 0.8123,
              "kernel": {"median_s": 1.5e-3, "throughput": 91.6e12},
              "baseline": {"name": "cuBLAS SGEMM", "median_s": 1.2e-3, "throughput": 114.5e12}}
    result = GradeResult("smem", Status.OK, points=2.5, max_points=3.0, target="gpu", details={"timing": timing})
    columns = {"smem_ms": 1.5, "smem_GFLOP/s": 91600.0, "smem_ratio": 0.8123}
    assert performance([result.as_dict()]) == pytest.approx(columns)
    failed = GradeResult("smem", Status.INCORRECT, "wrong after timing", details={"timing": timing})
    assert performance([failed.as_dict()]) == {}
    assert performance([GradeResult("map", Status.OK, target="sim").as_dict()]) == {}


def test_performance_columns_from_a_models_results():
    """A model track's result (`graders.model_engine`): its median ms and its speed-up over each baseline timed."""
    timing = {"submission": {"median_s": 2e-3, "min_s": 1.9e-3, "runs": 20},
              "eager": {"median_s": 3e-3, "min_s": 2.9e-3, "runs": 20},
              "compile": {"median_s": 2.5e-3, "min_s": 2.4e-3, "runs": 20}, "speedup": {"eager": 1.5, "compile": 1.25}}
    result = GradeResult("attention_block", Status.OK, points=1.5, max_points=3.0, target="cuda",
                         details={"timing": timing})
    assert performance([result.as_dict()]) == pytest.approx(
        {"attention_block_ms": 2.0, "attention_block_speedup_eager": 1.5, "attention_block_speedup_compile": 1.25})
    wrong = GradeResult("attention_block", Status.INCORRECT, "timed call 3: ...", details={"timing": timing})
    assert performance([wrong.as_dict()]) == {}


def test_an_assignment_generated_but_never_released_is_named(released_puzzles):
    """puzzles is in the gradebook with no submission: named once the course's exchange has released something
    else, not while it is released, and not when there is no outbound folder to tell."""
    root = released_puzzles.root
    outbound = root / "exchange" / "kernel-workshop" / "outbound"
    assert never_released(root) == []
    (outbound / "transpose").mkdir(parents=True)
    assert never_released(root) == ["puzzles"]
    (outbound / "puzzles").mkdir()
    assert never_released(root) == []
