"""Helpers: run solution cells the way the notebook does, in a fresh namespace with the setup cell."""
from __future__ import annotations

from pathlib import Path

from workshop.cells import exec_cell, read_cells, strip_solution_markers

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "tracks" / "puzzles" / "solutions"
REFERENCE = read_cells(SOLUTIONS / "reference.py")


def run_cells(*sources: str) -> dict:
    namespace: dict = {}
    exec_cell(REFERENCE["setup"], namespace, "<setup cell>")
    for i, source in enumerate(sources):
        exec_cell(strip_solution_markers(source), namespace, f"<cell {i}>")
    return namespace
