"""``workshop queue``: what the fleet is doing with an assignment, for the TA.

Each submission version sent is one row: ``pending`` (in the queue), ``running`` (on which worker),
``retrying`` (a worker fault, and which), ``graded`` (result not yet written), ``done`` (written, with its
score) or ``failed`` (with why: the submission could not be graded and scores 0, or the task failed).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from gradebook.fleet_ledger import Ledger


def live_state(app, task_id: str) -> tuple[str, str, str]:
    """(state, worker, why) of a task the coordinator has not written yet, from the result store."""
    from celery import states
    result = app.AsyncResult(task_id)
    state, info = result.state, result.info
    if state == states.STARTED and isinstance(info, dict):
        return "running", f"{info.get('hostname', '')} pid {info.get('pid', '')}", ""
    if state == states.RETRY:
        return "retrying", "", str(info).splitlines()[0] if info else ""
    if state == states.SUCCESS:
        return "graded", (info or {}).get("worker", ""), "not yet written (is `workshop grade` running?)"
    if state in states.EXCEPTION_STATES:
        return "failed", "", repr(info)
    return "pending", "", ""


def rows(db_url: str, assignment: str | None, app) -> list[dict]:
    """The ledger's rows in the gradebook at ``db_url``, those not yet written with their live state."""
    ledger = Ledger(db_url)
    try:
        found = ledger.rows(assignment)
    finally:
        ledger.close()
    for row in found:
        if row["state"] in ("queued", "writing"):
            row["state"], row["worker"], row["reason"] = live_state(app, row["task_id"])
    return found


def show(course: Path, assignment: str | None) -> int:
    from rich.console import Console
    from rich.table import Table

    from workshop.fleet.app import app
    from workshop.fleet.coordinator import course_config, gradebook_url
    course = course.resolve()
    found = rows(gradebook_url(course, course_config(course)), assignment, app)
    table = Table("assignment", "student", "state", "worker", "score", "tries", "why")
    for row in found:
        score = f"{row['score']:g} / {row['max_score']:g}" if row["score"] is not None else ""
        table.add_row(row["assignment"], row["student"], row["state"], row["worker"] or "", score,
                      str(row["deliveries"] or ""), (row["reason"] or "")[:100])
    console = Console()
    console.print(table)
    console.print(", ".join(f"{n} {state}" for state, n in sorted(Counter(r["state"] for r in found).items()))
                  or "nothing sent to the fleet yet")
    return 0
