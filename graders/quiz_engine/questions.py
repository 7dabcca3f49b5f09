"""A quiz's question kinds, the numbers each student is given, and the form an answer must have.

Everything here is public (a track's ``problem.py`` builds its questions from it and the student kit holds it);
the answers are in the track's ``key.py`` (`graders.quiz_engine.grade`).
"""
from __future__ import annotations

import hashlib
import math
import os
import random
from dataclasses import dataclass, field
from typing import Callable

from nbgrader.utils import get_username

REFERENCE_STUDENT = "reference"   # whose answers the source notebook's solution cells hold


@dataclass(frozen=True)
class Choice:
    """Multiple choice: the answer is one option's letter (``"b"``)."""

    id: str
    text: str                    # markdown
    options: dict[str, str]      # letter -> option text
    points: float = 1.0

    def form_problem(self, answer) -> str:
        if not isinstance(answer, str) or answer.strip().lower() not in self.options:
            return f"{self.id}: must be one of {', '.join(repr(k) for k in self.options)}, not {answer!r}"
        return ""


@dataclass(frozen=True)
class Numeric:
    """A number, right within ``rel_tol`` (a fraction of the answer) or ``abs_tol`` of the answer to the student's
    own numbers: ``draw`` makes them from the student's random generator, ``given`` states them
    (``"N = {n:,}"``)."""

    id: str
    text: str                    # markdown: the question with the numbers named, not given
    draw: Callable[[random.Random], dict] = field(repr=False)
    given: str = ""
    unit: str = ""
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    points: float = 1.0

    def form_problem(self, answer) -> str:
        if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
            return f"{self.id}: must be a number (an int or a float), not {answer!r}"
        return ""

    def tolerance(self) -> str:
        """How close an answer must be: "within 2%", "within 0.5 µs", or "exactly"."""
        parts = [f"{self.rel_tol:.0%}" if self.rel_tol else "", f"{self.abs_tol:g} {self.unit}".rstrip() if self.abs_tol else ""]
        return f"within {' or '.join(p for p in parts if p)}" if self.rel_tol or self.abs_tol else "exactly"


@dataclass(frozen=True)
class Line:
    """Code reading: the answer is the number of one line of ``code`` (numbered from 1)."""

    id: str
    text: str
    code: str
    points: float = 1.0

    @property
    def lines(self) -> int:
        return len(self.code.strip("\n").split("\n"))

    def form_problem(self, answer) -> str:
        if isinstance(answer, bool) or not isinstance(answer, int) or not 1 <= answer <= self.lines:
            return f"{self.id}: must be a line number from 1 to {self.lines}, not {answer!r}"
        return ""


Question = Choice | Numeric | Line


def student_seed(assignment: str, question: str, student: str) -> int:
    """The seed of one student's numbers for one question: the same every time, different between students."""
    return int.from_bytes(hashlib.sha256(f"{assignment}/{question}/{student}".encode()).digest()[:8], "big")


def numbers(assignment: str, question: Numeric, student: str) -> dict:
    """The numbers ``student`` is given in ``question``."""
    return question.draw(random.Random(student_seed(assignment, question.id, student)))


def notebook_student() -> str:
    """Whose numbers a notebook shows: ``WORKSHOP_STUDENT`` when set (on your own machine, your course id), else
    the name nbgrader files a submission under (``nbgrader.utils.get_username``: the hub's user)."""
    return os.environ.get("WORKSHOP_STUDENT") or get_username()
