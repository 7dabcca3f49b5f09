"""Puzzles courses made once for the end-to-end tests: the released assignment, and the same with the two
submissions several tests autograde alike (`GRADED`). A test takes its own copy (`CourseCopy`)."""
from __future__ import annotations

from pathlib import Path

import pytest
from nbgrader_course import GRADED, CourseCopy
from once import built_once

from workshop.course import Course


@pytest.fixture(scope="session")
def released_puzzles(released, tmp_path_factory) -> Course:
    """A scratch course with the puzzles assignment generated (nbgrader's release and gradebook)."""
    return CourseCopy(released["puzzles"], tmp_path_factory.mktemp("released-puzzles") / "course")


@pytest.fixture(scope="session")
def graded_puzzles(released, tmp_path_factory) -> Path:
    """The folder of a released course with `GRADED` submitted and autograded by real nbgrader."""
    def grade(folder: Path) -> None:
        course = CourseCopy(released["puzzles"], folder)
        for student, answers in GRADED.items():
            course.submit(student, answers)
            course.autograde(student)
    return built_once(tmp_path_factory, "graded-puzzles", grade)
