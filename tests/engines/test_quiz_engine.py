"""Every quiz through the trusted grader's own path, in this process (`graders.autograde._Grading` on a filled
source notebook: each graded cell's hidden call, `grade_answer`, read from the cell and made with the literal parsed
from the submission, the student named as nbgrader names them): its notebook builds with a cell per question of the
key, the key scores full marks for each student on their own numbers, another student's answers lose exactly the
numeric questions whose answers differ, the stub 0, each known-wrong answer file its ``expect:`` points; answer
forms; where the key is (and is not). tests/e2e/test_quizzes_nbgrader.py runs the same through ``nbgrader
autograde``."""
from __future__ import annotations

import logging
import os
import time

import nbformat
import pytest
from nbgrader.utils import is_grade

from graders import autograde, hidden_tests, settings, tracks
from graders.quiz_engine import grade
from graders.quiz_engine.notebook import QUIZ_STUB
from graders.quiz_engine.questions import REFERENCE_STUDENT, Choice, Line, Numeric, numbers
from graders.sandbox.visible import resolved, visible, within
from graders.submission import Submission
from workshop import staging, submissions

QUIZZES = [t for t in tracks.all_tracks() if t.engine == "quiz"]
by_quiz = pytest.mark.parametrize("quiz", QUIZZES, ids=lambda t: t.name)


def _questions(quiz: tracks.Track) -> list:
    return quiz.problem_module().QUESTIONS


def trusted_points(quiz: tracks.Track, student: str, answers: dict[str, str]) -> dict[str, float]:
    """Each graded cell's points when the trusted grader grades ``student``'s submission of ``answers``: the cell's
    points, or 0 where its output holds an error (as nbgrader reads them)."""
    nb = submissions.fill(nbformat.read(str(quiz.notebook_path), as_version=4), answers)
    grading = autograde._Grading(autograde.graded_cells(nb), Submission(nb), 2, logging.getLogger("quiz"),
                                 time_limit=60, student=student)
    grading.finish()
    points = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"] for c in nb.cells if is_grade(c)}
    return {gid: 0.0 if any(o.output_type == "error" for o in outputs) else points[gid]
            for gid, outputs in grading.outputs.items()}


def full_marks(quiz: tracks.Track) -> dict[str, float]:
    return {f"{q.id}_score": float(q.points) for q in _questions(quiz)}


def test_every_lecture_has_its_quiz():
    assert [q.name for q in QUIZZES] == [f"quiz_l{n}" for n in range(1, 9)]


@by_quiz
def test_a_quiz_has_six_to_ten_questions_of_every_kind_each_in_the_key_and_its_notebook(quiz):
    questions = _questions(quiz)
    assert 6 <= len(questions) <= 10
    assert {type(q) for q in questions} == {Choice, Numeric, Line}
    ids = {q.id for q in questions}
    assert set(grade.answer_key(quiz.name)) == ids
    for q in questions:   # every key answer is of its question's form
        assert q.form_problem(grade.right_answer(quiz.name, q, "alice")) == ""
    cells = [c.metadata.nbgrader for c in quiz.build_notebook().cells if "nbgrader" in c.metadata]
    assert {c["grade_id"] for c in cells if c["solution"]} == ids
    assert {c["grade_id"]: c["points"] for c in cells if c["grade"]} == full_marks(quiz)


@by_quiz
def test_the_key_scores_full_marks_for_each_student_on_their_own_numbers(quiz):
    numeric = [q for q in _questions(quiz) if isinstance(q, Numeric)]
    assert [numbers(quiz.name, q, "alice") for q in numeric] != [numbers(quiz.name, q, "bob") for q in numeric]
    for student in ("alice", "bob"):
        start = time.monotonic()
        points = trusted_points(quiz, student, submissions.quiz_answers(quiz.name, student))
        seconds = time.monotonic() - start
        assert points == full_marks(quiz)
        assert seconds < 5, f"{quiz.name}: the trusted grading of one submission took {seconds:.2f} s"


@by_quiz
def test_another_students_answers_fail_the_numeric_questions_whose_answers_differ(quiz):
    """carol hands in alice's answers: graded on carol's numbers (the student nbgrader names), not alice's."""
    points = trusted_points(quiz, "carol", submissions.quiz_answers(quiz.name, "alice"))
    differ = {f"{q.id}_score" for q in _questions(quiz) if isinstance(q, Numeric) and not grade.is_right(
        q, grade.right_answer(quiz.name, q, "alice"), grade.right_answer(quiz.name, q, "carol"))}
    assert differ
    assert points == {gid: 0.0 if gid in differ else p for gid, p in full_marks(quiz).items()}


@by_quiz
def test_the_stub_scores_zero(quiz):
    stub = {q.id: f"{q.id} = None\n{QUIZ_STUB}" for q in _questions(quiz)}
    assert trusted_points(quiz, "stub", stub) == dict.fromkeys(full_marks(quiz), 0.0)


@pytest.mark.parametrize("wrong", [w for q in QUIZZES for w in q.wrong_solutions()], ids=lambda p: p.stem)
def test_a_known_wrong_answer_file_scores_its_expect_points(wrong):
    quiz = tracks.get(wrong.parent.parent.parent.name)
    expected = tracks.expected_points(wrong)
    points = trusted_points(quiz, "dave", submissions.quiz_answers(quiz.name, "dave", wrong))
    unmet = {gid: p for gid, p in points.items()
             if not (expected[gid].matches(p) if gid in expected else p == full_marks(quiz)[gid])}
    assert not unmet, f"{wrong.name}: {unmet}, expected {expected}"


@by_quiz
def test_the_keys_answers_pass_every_public_check_and_a_missing_one_fails_it(quiz):
    """What ``nbgrader validate`` runs in each graded cell (tests/e2e/test_validate.py runs it for one quiz)."""
    for q in _questions(quiz):
        grade.check_answer(quiz.name, q.id, grade.right_answer(quiz.name, q, REFERENCE_STUDENT))
        with pytest.raises(grade.AnswerFailed, match=f"{q.id}: not written yet"):
            grade.check_answer(quiz.name, q.id, None)


def test_an_answer_of_the_wrong_form_fails_its_public_check_saying_the_form():
    with pytest.raises(grade.AnswerFailed, match="add_regime: not written yet"):
        grade.check_answer("quiz_l1", "add_regime", None)
    with pytest.raises(grade.AnswerFailed, match=r"add_regime: must be one of 'a', 'b', 'c', not 'd'"):
        grade.check_answer("quiz_l1", "add_regime", "d")
    grade.check_answer("quiz_l1", "add_regime", " B ")   # a letter in either case
    for not_a_number in (True, "0.08", float("nan"), [1]):
        with pytest.raises(grade.AnswerFailed, match="ridge: must be a number"):
            grade.check_answer("quiz_l1", "ridge", not_a_number)
    for not_a_line in (0, 7, 3.0):
        with pytest.raises(grade.AnswerFailed, match="timing: must be a line number from 1 to 6"):
            grade.check_answer("quiz_l1", "timing", not_a_line)


def test_a_numeric_answer_is_right_within_its_tolerance_and_an_exact_one_only_exactly():
    ridge = grade.question("quiz_l1", "ridge")   # within 2%
    assert grade.is_right(ridge, 101.9, 100) and not grade.is_right(ridge, 102.1, 100)
    blocks = grade.question("quiz_l2", "blocks")   # exact
    assert grade.is_right(blocks, 7.0, 7) and not grade.is_right(blocks, 7.001, 7)


def test_the_trusted_grader_refuses_to_grade_without_knowing_the_student(monkeypatch):
    monkeypatch.setattr(hidden_tests, "_in_trusted_grader", True)
    with pytest.raises(RuntimeError, match="did not say whose submission"):
        hidden_tests.HIDDEN_TESTS["grade_answer"]("quiz_l1", "ridge", 30.0)


def test_a_numeric_questions_cell_shows_the_students_own_numbers(monkeypatch, capsys):
    monkeypatch.setenv("WORKSHOP_STUDENT", "alice")
    grade.show_numbers("quiz_l1", "ridge")
    assert capsys.readouterr().out == (f"Your numbers (student 'alice'): "
                                       f"{grade.given('quiz_l1', grade.question('quiz_l1', 'ridge'), 'alice')}\n")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")   # in the sandboxed notebook: whose it is is unknown
    grade.show_numbers("quiz_l1", "ridge")
    assert "stated in the graded cell's feedback" in capsys.readouterr().out


def test_the_key_is_on_a_worker_and_never_in_the_student_kit_or_a_sandbox():
    keys = {f"tracks/{q.name}/{grade.KEY_FILE}" for q in QUIZZES}
    assert keys <= {p.as_posix() for p in staging.worker_files()}
    assert not keys & {p.as_posix() for p in staging.student_files()}
    binds = [resolved(host) for host, _ in visible(gpu=False, courses=[settings.ROOT], env=os.environ).binds]
    assert any(host == settings.ROOT / "tracks/quiz_l1/problem.py" for host in binds)   # the grader files are
    for key in keys:
        assert not any(host and within(settings.ROOT.resolve() / key, host) for host in binds), key
