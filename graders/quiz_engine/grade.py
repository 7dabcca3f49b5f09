"""Grading a quiz answer (`grade_answer`, the hidden test), checking its form (`check_answer`, the graded cell's
public part) and stating a numeric question with the student's own numbers (`show_numbers`, its question cell).

The answer key is the track's ``key.py`` (`answer_key`), read in the trusted grader's process only: see
`graders.quiz_engine` for why it is none of the grader files and how the grader knows the student.
"""
from __future__ import annotations

import functools
import importlib.util
import math
from types import ModuleType

from graders import hidden_tests, settings, tracks
from graders.hidden_tests import TestFailed, hidden_test
from graders.quiz_engine.questions import Choice, Line, Numeric, Question, notebook_student, numbers
from graders.result import GradeResult, Status, publish

KEY_FILE = "key.py"   # a quiz track's answer key, beside its problem.py
NOT_WRITTEN = "not written yet"


class AnswerFailed(TestFailed):
    """A quiz answer is missing, of the wrong form, or wrong; the message says which question and why."""


def question(assignment: str, question_id: str) -> Question:
    """The question ``question_id`` of the quiz track ``assignment`` (its ``problem.py``'s ``QUESTIONS``)."""
    found = {q.id: q for q in tracks.get(assignment).problem_module().QUESTIONS}
    if question_id not in found:
        raise KeyError(f"{assignment} has no question {question_id!r}")
    return found[question_id]


@functools.cache
def _key_module(assignment: str) -> ModuleType:
    path = settings.TRACKS / assignment / KEY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the quiz's answer key is not on this machine (a grading worker's copy "
                                "holds it; a student's does not)")
    spec = importlib.util.spec_from_file_location(f"tracks.{assignment}.key", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer_key(assignment: str) -> dict:
    """The quiz's ``KEY``: question id -> a letter, a line number, or a function of the student's numbers."""
    return _key_module(assignment).KEY


def right_answer(assignment: str, q: Question, student: str):
    """What ``student`` must answer to ``q``: the key's letter or line, or its function of their numbers."""
    entry = answer_key(assignment)[q.id]
    return entry(numbers(assignment, q, student)) if isinstance(q, Numeric) else entry


def is_right(q: Question, answer, right) -> bool:
    """Whether ``answer`` (of the right form) is ``right``: a numeric one within the question's tolerance."""
    if isinstance(q, Numeric):
        return math.isclose(answer, right, rel_tol=q.rel_tol, abs_tol=q.abs_tol)
    if isinstance(q, Choice):
        return answer.strip().lower() == right
    return answer == right


def _form(q: Question, answer) -> None:
    if answer is None:
        raise AnswerFailed(f"{q.id}: {NOT_WRITTEN}: replace None with your answer")
    if why := q.form_problem(answer):
        raise AnswerFailed(why)


def given(assignment: str, q: Numeric, student: str) -> str:
    """The numbers ``student`` is given in ``q``, as the question states them."""
    return q.given.format(**numbers(assignment, q, student))


@hidden_test
def grade_answer(assignment: str, question_id: str, answer) -> None:
    """The hidden test of one quiz question: full points when ``answer`` is right for the graded student, else
    `AnswerFailed`. The student is nbgrader's (`graders.hidden_tests.graded_student`) in the trusted grader, the
    notebook's (`notebook_student`) when the source notebook runs."""
    q = question(assignment, question_id)
    student = hidden_tests.graded_student()
    if not student:
        if hidden_tests.in_trusted_grader():
            raise RuntimeError("the trusted grader did not say whose submission it grades")
        student = notebook_student()
    details = {"kind": type(q).__name__.lower(), "student": student}
    if isinstance(q, Numeric):
        details["numbers"] = numbers(assignment, q, student)
        if q.given:   # a question whose numbers are the same for everyone (a report's) states none
            print(f"Graded with the numbers of student {student!r}: {given(assignment, q, student)}")
    try:
        _form(q, answer)
        right = right_answer(assignment, q, student)
        if not is_right(q, answer, right):
            raise AnswerFailed(_wrong(q, answer))
    except AnswerFailed as failed:
        publish(GradeResult(question_id, Status.INCORRECT, str(failed), max_points=q.points, details=details))
        raise
    publish(GradeResult(question_id, Status.OK, points=q.points, max_points=q.points, details=details))
    print(f"✓ {question_id}: right")


def _wrong(q: Question, answer) -> str:
    if isinstance(q, Numeric):
        return f"{q.id}: {answer!r} is not the answer to your numbers ({q.tolerance()})"
    if isinstance(q, Line):
        return f"{q.id}: line {answer} is not the line asked for"
    return f"{q.id}: {answer!r} is not the right option"


def check_answer(assignment: str, question_id: str, answer) -> None:
    """The graded cell's public part: ``answer`` is written and of the question's form (what ``nbgrader validate``
    can tell without the key); `AnswerFailed` otherwise."""
    q = question(assignment, question_id)
    _form(q, answer)
    print(f"✓ {question_id}: answered {answer!r} (graded once you hand the notebook in)")


def show_numbers(assignment: str, question_id: str) -> None:
    """A numeric question's cell: print the student's own numbers. During ``nbgrader autograde`` the notebook
    does not know whose submission it is: the graded cell's feedback states the numbers instead."""
    q = question(assignment, question_id)
    if hidden_tests.autograding_in_notebook():
        print("Your numbers are stated in the graded cell's feedback below.")
        return
    student = notebook_student()
    print(f"Your numbers (student {student!r}): {given(assignment, q, student)}")
