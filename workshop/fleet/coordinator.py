"""``workshop grade ASSIGNMENT``: send every submission to the fleet, follow it, and write the gradebook.

The coordinator is the only writer of the gradebook (nbgrader's own ``SaveAutoGrades`` and
``AssignLatePenalties``, run on the autograded notebook a worker returns, against the course's database) and
of ``autograded/``. Each submission version is written once (`gradebook.fleet_ledger`); one that is already
``done`` is not sent again unless ``force``. Without ``WORKSHOP_BROKER_URL`` the same grading runs here, one
submission after another (local mode).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from gradebook.fleet_ledger import Ledger
from workshop.fleet import isolated
from workshop.fleet.app import SIM_QUEUE, broker_url, grade_time_limit_s

POLL_S = 0.5


@dataclass(frozen=True)
class Submission:
    student: str
    notebooks: dict[str, str]   # file name -> JSON text
    timestamp: str | None       # nbgrader's timestamp.txt, when the submission has one

    @property
    def checksum(self) -> str:
        return isolated.checksum(self.notebooks)


def course_config(course: Path) -> Config:
    """The course's nbgrader config, as nbgrader loads it from ``course``."""
    cwd = os.getcwd()
    os.chdir(course)
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    finally:
        os.chdir(cwd)


def gradebook_url(course: Path, config: Config) -> str:
    """The configured gradebook URL, a relative SQLite path made absolute against the course directory."""
    url = config.CourseDirectory.db_url
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url[len(prefix):].startswith("/"):
        return prefix + str((course / url[len(prefix):]).resolve())
    return url


def submissions(course: Path, assignment: str, students: list[str] | None = None) -> list[Submission]:
    """Every student's submission of ``assignment`` under submitted/, or only those of ``students``."""
    found = []
    for folder in sorted((course / "submitted").glob(f"*/{assignment}")):
        student = folder.parent.name
        if students and student not in students:
            continue
        notebooks = {p.name: p.read_text() for p in sorted(folder.glob("*.ipynb"))}
        stamp = folder / "timestamp.txt"
        if notebooks:
            found.append(Submission(student, notebooks, stamp.read_text().strip() if stamp.is_file() else None))
    missing = set(students or []) - {s.student for s in found}
    if missing:
        raise FileNotFoundError(f"no submission of {assignment} by {', '.join(sorted(missing))} under "
                                f"{course / 'submitted'}")
    return found


def source_notebooks(course: Path, assignment: str) -> dict[str, str]:
    folder = course / "assignments" / assignment
    sources = {p.name: p.read_text() for p in sorted(folder.glob("*.ipynb"))}
    if not sources:
        raise FileNotFoundError(f"no source notebook in {folder}")
    return sources


def default_queue(assignment: str) -> str:
    """The simulator queue, or for a GPU-only track the one GPU model's queue that live workers serve."""
    from graders import tracks
    track = tracks.find(assignment)
    if track is None or not track.requires_gpu:
        return SIM_QUEUE
    from workshop.fleet.app import app
    served = app.control.inspect(timeout=2).active_queues() or {}
    gpu_queues = sorted({q["name"] for queues in served.values() for q in queues if q["name"].startswith("gpu-")})
    if len(gpu_queues) != 1:
        raise RuntimeError(f"{assignment} needs a GPU worker; live workers serve "
                           f"{gpu_queues or 'no GPU queue'}: name one with --queue")
    return gpu_queues[0]


class Writer:
    """Writes results into the course's gradebook and autograded/, once per submission version."""

    def __init__(self, course: Path, assignment: str):
        self.course, self.assignment = course, assignment
        self.config = course_config(course)
        self.url = gradebook_url(course, self.config)
        self.course_id = self.config.CourseDirectory.course_id
        with Gradebook(self.url, self.course_id) as gb:
            gb.find_assignment(assignment)   # MissingEntry: run `nbgrader generate_assignment` first
            gb.engine.dispose()
        self.ledger = Ledger(self.url)

    def close(self) -> None:
        self.ledger.close()

    def _submission(self, sub: Submission) -> None:
        """nbgrader's own first step of autograde: the student and the submission, with its timestamp."""
        with Gradebook(self.url, self.course_id) as gb:
            gb.update_or_create_student(sub.student)
            kw = {"timestamp": sub.timestamp} if sub.timestamp else {}
            gb.update_or_create_submission(self.assignment, sub.student, **kw)
            gb.engine.dispose()

    def write(self, task_id: str, sub: Submission, result: dict) -> bool:
        """Write one result; False when this task's result was already written."""
        if not self.ledger.claim(task_id):
            return False
        self._submission(sub)
        done = {"worker": result.get("worker"), "deliveries": result.get("deliveries"),
                "seconds": result.get("seconds")}
        if result["status"] != "graded":   # no grades: nbgrader's export counts the submission as 0
            self.ledger.finish(task_id, "failed", reason=result.get("reason"), **done)
            return True
        folder = self.course / "autograded" / sub.student / self.assignment
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in result["notebooks"].items():
            nb = nbformat.reads(text, as_version=4)
            resources = {"nbgrader": {"db_url": self.url, "assignment": self.assignment,
                                      "notebook": Path(name).stem, "student": sub.student}}
            for step in (SaveAutoGrades(config=self.config), AssignLatePenalties(config=self.config)):
                nb, resources = step.preprocess(nb, resources)
                step.gradebook.engine.dispose()
            path = folder / name
            if path.exists():
                path.chmod(0o644)
            nbformat.write(nb, str(path))
            path.chmod(0o444)   # as nbgrader leaves autograded files
        self.ledger.finish(task_id, "done", score=sum(result["scores"].values()),
                           max_score=sum(result["max_scores"].values()), **done)
        return True


def grade(course: Path, assignment: str, students: list[str] | None = None, queue: str | None = None,
          force: bool = False) -> int:
    """Grade the submissions of ``assignment``; 0 when every one got a result, 1 otherwise."""
    from rich.console import Console
    console = Console()
    course = course.resolve()
    writer = Writer(course, assignment)
    try:
        todo, skipped = [], 0
        for sub in submissions(course, assignment, students):
            row = writer.ledger.find(assignment, sub.student, sub.checksum)
            if row and row["state"] == "done" and not force:
                skipped += 1
            else:
                todo.append(sub)
        if skipped:
            console.print(f"{skipped} submission(s) already graded and written (--force grades them again)")
        sources = source_notebooks(course, assignment)
        if broker_url():
            lost = _fleet(writer, assignment, todo, sources, queue or default_queue(assignment), console)
        else:
            console.print("No WORKSHOP_BROKER_URL: grading here, one submission at a time (local mode)")
            lost = _local(writer, assignment, todo, sources, console)
    finally:
        writer.close()
    _summary(writer.ledger.rows(assignment), {(s.student, s.checksum) for s in todo}, console)
    return 1 if lost else 0


def _progress(console):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


def _local(writer: Writer, assignment: str, todo: list[Submission], sources: dict[str, str], console) -> int:
    with _progress(console) as progress:
        bar = progress.add_task(f"grading {assignment} here", total=len(todo))
        for sub in todo:
            task_id = f"local-{sub.checksum[:16]}-{time.time_ns()}"
            writer.ledger.queued(assignment, sub.student, sub.checksum, task_id, "local")
            try:
                result = isolated.grade(assignment, sub.student, sources, sub.notebooks, grade_time_limit_s())
            except isolated.InfrastructureFault as exc:
                writer.ledger.finish(task_id, "failed", reason=str(exc)[:2000])
                console.print(f"[red]{sub.student}: {str(exc).splitlines()[0]}")
                return 1
            writer.write(task_id, sub, {**result, "worker": "local", "deliveries": 1})
            progress.advance(bar)
    return 0


def _fleet(writer: Writer, assignment: str, todo: list[Submission], sources: dict[str, str], queue: str,
           console) -> int:
    """Enqueue one task per submission, then write each result as it arrives. Broker or result-store
    outages while following (a Redis restart) are waited out."""
    from celery import states

    from workshop.fleet.tasks import grade_submission
    pending = {}
    for sub in todo:
        result = grade_submission.apply_async((assignment, sub.student, sources, sub.notebooks), queue=queue)
        writer.ledger.queued(assignment, sub.student, sub.checksum, result.id, queue)
        pending[result.id] = (sub, result)
    lost = 0
    with _progress(console) as progress:
        bar = progress.add_task(f"{assignment} on queue {queue}", total=len(pending))
        while pending:
            running = 0
            for task_id, (sub, result) in list(pending.items()):
                try:
                    state = result.state
                    if state == states.SUCCESS:
                        writer.write(task_id, sub, result.result)
                    elif state in states.EXCEPTION_STATES - {states.RETRY}:
                        writer.ledger.claim(task_id)
                        writer.ledger.finish(task_id, "failed", reason=f"{state}: {result.result!r}"[:2000])
                        lost += 1
                    else:
                        running += state == states.STARTED
                        continue
                except _OUTAGES as exc:
                    progress.update(bar, description=f"{assignment}: waiting for Redis ({type(exc).__name__})")
                    time.sleep(2)
                    break
                del pending[task_id]
                progress.advance(bar)
            else:
                progress.update(bar, description=f"{assignment} on queue {queue}: {running} running")
                time.sleep(POLL_S)
    return lost


def _outages() -> tuple[type[BaseException], ...]:
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError, TimeoutError
    return ConnectionError, TimeoutError, OperationalError, OSError


_OUTAGES = _outages()


def _summary(rows: list[dict], sent: set[tuple[str, str]], console) -> None:
    from rich.table import Table
    table = Table("student", "state", "score", "worker", "s", "why")
    for row in rows:
        if (row["student"], row["checksum"]) in sent:
            score = f"{row['score']:g} / {row['max_score']:g}" if row["score"] is not None else ""
            table.add_row(row["student"], row["state"], score, row["worker"] or "",
                          f"{row['seconds']:.1f}" if row["seconds"] else "", (row["reason"] or "")[:80])
    if table.row_count:
        console.print(table)
