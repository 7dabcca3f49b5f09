"""``workshop audit puzzles``: regrade every autograded puzzles submission out of band, report and fix.

Run it in the course directory after ``nbgrader autograde``. With ``--fix`` each finding's test cell gets
the regraded score as its manual score, which the gradebook and ``nbgrader export`` then use.
"""
from __future__ import annotations

import os
from pathlib import Path

from gradebook.overrides import recorded_scores, set_manual_score
from graders.audit import Finding, audit_student

ASSIGNMENT = NOTEBOOK = "puzzles"


def audit_course(course: Path, fix: bool = False, student: str = "*") -> list[Finding]:
    db_url = os.environ.get("WORKSHOP_GRADEBOOK_URL", f"sqlite:///{course / 'gradebook.db'}")
    findings: list[Finding] = []
    for autograded in sorted(course.glob(f"autograded/{student}/{ASSIGNMENT}/{NOTEBOOK}.ipynb")):
        student = autograded.parts[-3]
        submitted = course / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        found = audit_student(submitted, student, recorded_scores(db_url, ASSIGNMENT, NOTEBOOK, student))
        print(f"{student}: " + (f"{len(found)} test cell(s) scored higher than the regrade" if found else "ok"))
        for f in found:
            print(f"  {f.cell}: gradebook {f.recorded:g}, regrade {f.regraded:g} — {f.reason[:200]}")
            if fix:
                set_manual_score(db_url, ASSIGNMENT, NOTEBOOK, student, f.cell, f.regraded)
        findings += found
    if findings and fix:
        print(f"{len(findings)} score(s) set to the regrade as manual scores.")
    return findings
