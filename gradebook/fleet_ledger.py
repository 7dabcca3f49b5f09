"""The fleet's ledger: one row per submission version sent to a worker, in the gradebook's own database.

A row is keyed by (assignment, student, checksum of the submitted notebooks). ``workshop grade`` skips a
submission whose row is ``done`` (graded, written) and writes a result only after claiming its row from
``queued`` to ``writing``: a task delivered twice, or a result seen twice, writes the gradebook once. A
resubmission has a new checksum, so a new row. ``workshop queue`` reads it.
"""
from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa

metadata = sa.MetaData()
jobs = sa.Table(
    "workshop_fleet_jobs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("assignment", sa.String(128), nullable=False),
    sa.Column("student", sa.String(128), nullable=False),
    sa.Column("checksum", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(64), nullable=False, index=True),
    sa.Column("queue", sa.String(128), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),   # queued | writing | done | failed
    sa.Column("worker", sa.String(256)),
    sa.Column("deliveries", sa.Integer),
    sa.Column("reason", sa.Text),
    sa.Column("score", sa.Float),
    sa.Column("max_score", sa.Float),
    sa.Column("seconds", sa.Float),
    sa.Column("queued_at", sa.DateTime(timezone=True)),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.UniqueConstraint("assignment", "student", "checksum", name="workshop_fleet_jobs_submission"),
)


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Ledger:
    """The ledger table in the database at ``db_url`` (open nbgrader's Gradebook on it first: nbgrader stamps
    its schema version only into a database that has no tables yet)."""

    def __init__(self, db_url: str):
        self.engine = sa.create_engine(db_url, future=True)
        metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def find(self, assignment: str, student: str, checksum: str) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(jobs).where(jobs.c.assignment == assignment, jobs.c.student == student,
                                                  jobs.c.checksum == checksum)).mappings().first()
        return dict(row) if row else None

    def queued(self, assignment: str, student: str, checksum: str, task_id: str, queue: str) -> None:
        """Record that this submission version was sent as ``task_id`` (again, when it was sent before)."""
        values = {"task_id": task_id, "queue": queue, "state": "queued", "worker": None, "deliveries": None,
                  "reason": None, "score": None, "max_score": None, "seconds": None, "queued_at": _now(),
                  "finished_at": None}
        key = (jobs.c.assignment == assignment, jobs.c.student == student, jobs.c.checksum == checksum)
        with self.engine.begin() as conn:
            if conn.execute(sa.update(jobs).where(*key).values(**values)).rowcount == 0:
                conn.execute(jobs.insert().values(assignment=assignment, student=student, checksum=checksum,
                                                  **values))

    def claim(self, task_id: str) -> bool:
        """Take the right to write ``task_id``'s result: True once, False for every later call."""
        with self.engine.begin() as conn:
            claimed = conn.execute(sa.update(jobs).where(jobs.c.task_id == task_id, jobs.c.state == "queued")
                                   .values(state="writing"))
        return claimed.rowcount == 1

    def finish(self, task_id: str, state: str, **fields) -> None:
        """``done`` (written) or ``failed``, with the worker, deliveries, reason, score and seconds."""
        with self.engine.begin() as conn:
            conn.execute(sa.update(jobs).where(jobs.c.task_id == task_id)
                         .values(state=state, finished_at=_now(), **fields))

    def rows(self, assignment: str | None = None) -> list[dict]:
        query = sa.select(jobs).order_by(jobs.c.assignment, jobs.c.student, jobs.c.queued_at)
        if assignment:
            query = query.where(jobs.c.assignment == assignment)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]
