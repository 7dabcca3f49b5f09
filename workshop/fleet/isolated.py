"""Grade one submission through the trusted path in a course directory of its own.

The directory holds the course config (this checkout's ``nbgrader_config.py``), a gradebook (a throwaway SQLite
file) into which the assignment was generated, and this one submission. ``nbgrader generate_assignment`` runs once
per source version, from the source notebooks sent with the task, into a template copied for each submission;
the source notebooks (every solution) and the release are deleted as soon as it is generated, so a worker keeps
no solutions between tasks. The template's gradebook holds what ``nbgrader autograde`` needs: each graded cell's
source with its grading call, and the solution cells as released (stubs). Then real ``nbgrader autograde``
grades the submission, sandboxed as on the TA's machine. Nothing here sees the course's gradebook, its URL or
other students' files.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from graders.settings import ROOT
from workshop.course import nbgrader_env
from workshop.fleet.processes import kill_tree

# Markers in nbgrader's log of a worker that cannot grade at all (graders.gpu, graders.sandbox.run), or too busy to
# (graders.sandbox.starvation): the submission is retried, never scored.
INFRASTRUCTURE_MARKERS = ("NeedsGPUWorker", "SandboxUnavailable", "cannot sandbox student code", "WorkerStarved")
# Settings the grading child must not inherit: the real gradebook and the fleet's own.
PRIVATE_ENV = ("WORKSHOP_GRADEBOOK_URL", "WORKSHOP_BROKER_URL", "WORKSHOP_RESULT_URL")
LOG_TAIL = 20_000


class InfrastructureFault(RuntimeError):
    """This worker could not grade the submission (no sandbox, no GPU, a broken template): retry elsewhere."""


def checksum(notebooks: dict[str, str]) -> str:
    """The submission's identity: sha256 over its notebooks' names and contents."""
    digest = hashlib.sha256()
    for name in sorted(notebooks):
        digest.update(name.encode() + b"\0" + notebooks[name].encode() + b"\0")
    return digest.hexdigest()


def cache_dir() -> Path:
    return Path(os.environ.get("WORKSHOP_WORKER_CACHE") or Path(tempfile.gettempdir()) / f"workshop-{os.getuid()}")


def _env(course: Path) -> dict[str, str]:
    env = {k: v for k, v in nbgrader_env().items() if k not in PRIVATE_ENV}
    env["WORKSHOP_GRADEBOOK_URL"] = f"sqlite:///{course / 'gradebook.db'}"
    return env


def _run(course: Path, args: list[str], timeout: float) -> tuple[int | None, str]:
    """``nbgrader ARGS`` in ``course``, killed with every process below it (the notebook's sandboxed kernel
    too) when it runs past ``timeout`` or this process is interrupted; (exit status or None on timeout, its
    log)."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=course, env=_env(course),
                                stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
        log.seek(0)
        return rc, log.read()


def _template(assignment: str, sources: dict[str, str]) -> Path:
    """A course directory with the assignment generated into its gradebook, built once per source version; it
    holds no source notebook."""
    config = (ROOT / "nbgrader_config.py").read_bytes()
    key = hashlib.sha256(config + checksum(sources).encode()).hexdigest()[:20]
    template = cache_dir() / f"{assignment}-{key}"
    if template.is_dir():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=template.parent))
    shutil.copy(ROOT / "nbgrader_config.py", build / "nbgrader_config.py")
    folder = build / "assignments" / assignment
    folder.mkdir(parents=True)
    for name, text in sources.items():
        (folder / name).write_text(text)
    rc, log = _run(build, ["generate_assignment", assignment, "--force"], timeout=600)
    if rc != 0:
        shutil.rmtree(build, ignore_errors=True)
        raise InfrastructureFault(f"nbgrader generate_assignment {assignment} failed ({rc}):\n{log[-LOG_TAIL:]}")
    for generated_from in ("assignments", "release"):   # the solutions, and the student version: not needed
        shutil.rmtree(build / generated_from)
    try:
        build.rename(template)
    except OSError:   # another worker on this host built it first
        shutil.rmtree(build, ignore_errors=True)
    return template


def grade(assignment: str, student: str, sources: dict[str, str], submitted: dict[str, str],
          time_limit: float) -> dict:
    """Autograde ``submitted`` (notebook name -> JSON text) as ``student``'s ``assignment``.

    Returns ``status`` "graded" with ``scores`` and ``max_scores`` (by grade_id) and ``notebooks`` (the
    autograded notebooks' JSON), or ``status`` "failed" with ``reason`` (the submission could not be graded:
    it scores 0); ``log`` is nbgrader's. Raises `InfrastructureFault` when this worker cannot grade at all.
    """
    from gradebook.summary import cell_scores
    template = _template(assignment, sources)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="workshop-grade-") as scratch:
        course = Path(scratch) / "course"
        shutil.copytree(template, course)
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        for name, text in submitted.items():
            (folder / name).write_text(text)
        rc, log = _run(course, ["autograde", assignment, f"--student={student}", "--force"], timeout=time_limit)
        result = {"seconds": round(time.monotonic() - start, 2), "log": log[-LOG_TAIL:]}
        if rc is None:
            return {**result, "status": "failed", "reason": f"grading ran past its {time_limit:g} s limit: stopped"}
        if any(marker in log for marker in INFRASTRUCTURE_MARKERS):
            raise InfrastructureFault(f"this worker cannot grade {assignment}:\n{log[-LOG_TAIL:]}")
        if rc != 0:
            return {**result, "status": "failed", "reason": _last_error(log) or f"nbgrader exited with {rc}"}
        table = cell_scores(f"sqlite:///{course / 'gradebook.db'}", assignment)
        graded = course / "autograded" / student / assignment
        return {**result, "status": "graded",
                "scores": {row.cell: row.score for row in table.itertuples()},
                "max_scores": {row.cell: row.max_score for row in table.itertuples()},
                "notebooks": {p.name: p.read_text() for p in sorted(graded.glob("*.ipynb"))}}


def _last_error(log: str) -> str:
    """The exception nbgrader reports for a submission it could not process, else its last error line."""
    lines = log.splitlines()
    marks = [i for i, line in enumerate(lines) if "There was an error processing assignment '" in line]
    if marks:
        before = [line.strip() for line in lines[:marks[-1]] if line.strip() and "|" not in line]
        if before:
            return before[-1][:500]
    errors = [line.strip() for line in lines if "ERROR" in line]
    return errors[-1][:500] if errors else ""
