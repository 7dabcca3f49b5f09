"""Out-of-band audit of autograded puzzle submissions: regrade each kernel from the submitted file.

nbgrader runs a submission's cells and its hidden tests in one Python process, so a student's cell can
patch the grader there (``graders.puzzle_grade.grade_correctness = lambda *a: None``). The audit does not
trust that process: it parses each solution cell from the submitted notebook (never runs it, see
`graders.cell_source`), grades the kernel in a fresh simulator child, and reports every test cell whose
gradebook score is higher than the regrade.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

import puzzles
from graders.cell_source import kernel_source_from_cell
from graders.kernel_source import KernelSourceError
from graders.puzzle_grade import run_source


@dataclass(frozen=True)
class Finding:
    student: str
    cell: str          # the test cell's grade_id, e.g. "zip_correct"
    recorded: float    # what nbgrader wrote to the gradebook
    regraded: float    # what the out-of-band regrade gives
    reason: str


def regrade_cells(submission: Path) -> dict[str, tuple[bool, str]]:
    """Each puzzle test cell's verdict from the submitted file alone: ``{grade_id: (passed, reason)}``."""
    nb = nbformat.read(str(submission), as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells}
    verdicts: dict[str, tuple[bool, str]] = {}
    for puzzle in puzzles.PUZZLES:
        try:
            source = kernel_source_from_cell(cells.get(puzzle.id, ""), puzzle.kernel_name)
        except KernelSourceError as exc:
            verdicts[f"{puzzle.id}_correct"] = verdicts[f"{puzzle.id}_limits"] = (False, str(exc))
            continue
        run = run_source(puzzle.id, source, puzzle.kernel_name, "hidden", "sim")
        verdicts[f"{puzzle.id}_correct"] = (run.correct, run.message)
        within = run.correct and not run.violations
        verdicts[f"{puzzle.id}_limits"] = (within, run.message or "; ".join(run.violations))
    return verdicts


def audit_student(submission: Path, student: str, recorded: dict[str, tuple[float, float]]) -> list[Finding]:
    """Compare gradebook scores ``{grade_id: (score, max_score)}`` with the regrade of ``submission``."""
    findings = []
    for cell, (passed, reason) in regrade_cells(submission).items():
        score, max_score = recorded.get(cell, (0.0, 0.0))
        regraded = max_score if passed else 0.0
        if score > regraded:
            findings.append(Finding(student, cell, score, regraded, reason))
    return findings
