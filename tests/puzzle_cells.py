"""Helpers: run solution cells the way the notebook does, in a fresh namespace with the setup cell."""
from __future__ import annotations

from graders import tracks
from workshop.cells import exec_cell, read_cells, strip_solution_markers

SOLUTIONS = tracks.get("puzzles").solutions
REFERENCE = read_cells(SOLUTIONS / "reference.py")


def run_cells(*sources: str) -> dict:
    namespace: dict = {}
    exec_cell(REFERENCE["setup"], namespace, "<setup cell>")
    for i, source in enumerate(sources):
        exec_cell(strip_solution_markers(source), namespace, f"<cell {i}>")
    return namespace
