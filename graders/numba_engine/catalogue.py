"""Every puzzle of every numba track, looked up by its id (= the nbgrader grade_id of its solution cell).

The puzzles themselves are defined in each numba track's ``problem.py`` (``PUZZLES``).
"""
from __future__ import annotations

from graders import tracks
from graders.numba_engine.puzzle import Puzzle

PUZZLES: list[Puzzle] = [p for _, module in tracks.problem_modules("numba") for p in module.PUZZLES]
BY_ID: dict[str, Puzzle] = {p.id: p for p in PUZZLES}


def get(puzzle_id: str) -> Puzzle:
    try:
        return BY_ID[puzzle_id]
    except KeyError:
        raise KeyError(f"no puzzle {puzzle_id!r}; known: {', '.join(BY_ID)}") from None
