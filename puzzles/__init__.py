"""The GPU Puzzles library: one `Puzzle` spec per puzzle, looked up by its short id (= nbgrader grade_id)."""
from .library import PUZZLES
from .spec import Case, Limits, Puzzle

BY_ID: dict[str, Puzzle] = {p.id: p for p in PUZZLES}


def get(puzzle_id: str) -> Puzzle:
    try:
        return BY_ID[puzzle_id]
    except KeyError:
        raise KeyError(f"no puzzle {puzzle_id!r}; known: {', '.join(BY_ID)}") from None


__all__ = ["PUZZLES", "BY_ID", "Case", "Limits", "Puzzle", "get"]
