"""Puzzles courses made once for the end-to-end tests: the released assignment, and the same with the two
submissions several tests autograde alike (`GRADED`). A test takes its own copy (`CourseCopy`)."""
from __future__ import annotations

import pytest
from nbgrader_course import GRADED, CourseCopy

from workshop.course import Course


@pytest.fixture(scope="session")
def released_puzzles(released, tmp_path_factory) -> Course:
    """A scratch course with the puzzles assignment generated (nbgrader's release and gradebook)."""
    return CourseCopy(released["puzzles"], tmp_path_factory.mktemp("released-puzzles") / "course")


@pytest.fixture(scope="session")
def graded_puzzles(released_puzzles, tmp_path_factory) -> Course:
    """The released course with `GRADED` submitted and autograded by real nbgrader."""
    course = CourseCopy(released_puzzles.root, tmp_path_factory.mktemp("graded-puzzles") / "course")
    for student, answers in GRADED.items():
        course.submit(student, answers)
        course.autograde(student)
    return course
