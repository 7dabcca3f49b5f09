"""The import path notebooks released before the engines were split use: see `graders.numba_engine.grade`."""
from graders.numba_engine.grade import check, grade_correctness, grade_limits  # noqa: F401
