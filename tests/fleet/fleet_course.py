"""Courses for the fleet tests: the puzzles assignment cut to its first puzzles, so that twenty nbgrader
autogrades fit in CI, and submissions of the reference, the stub and known-wrong cells."""
from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.utils import is_solution

from workshop import course as nbg
from workshop import submissions

PUZZLES = ("map", "zip")
# (student name prefix, answers, expected total out of 6)
KINDS = [
    ("reference", submissions.reference_answers, 6.0),
    ("stub", dict, 0.0),
    ("zip-wrong", lambda: submissions.wrong_answers("zip_subtracts"), 3.0),
    ("map-cheat", lambda: submissions.wrong_answers("map_hardcoded"), 3.0),
]


def cut_puzzles(nb: nbformat.NotebookNode, keep: tuple[str, ...] = PUZZLES) -> nbformat.NotebookNode:
    """The notebook's title and setup, then only the cells of the puzzles in ``keep``."""
    cells, current = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.startswith("## Puzzle"):
            current = next(c.metadata.nbgrader["grade_id"] for c in nb.cells[i:] if is_solution(c))
        if current is None or current in keep:
            cells.append(cell)
    nb = nbformat.from_dict(nb)
    nb.cells = cells
    return nb


def nbgrader(course: Path, env: dict[str, str] | None, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                          env={**nbg.nbgrader_env(), **(env or {})})
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"
    return proc


def make_course(dest: Path, env: dict[str, str] | None = None) -> tuple[Path, nbformat.NotebookNode]:
    """A course with the cut puzzles assignment generated (into the gradebook ``env`` names); returns it and
    the released notebook."""
    course = nbg.make_course(dest, ["puzzles"])
    source = course / "assignments" / "puzzles" / "puzzles.ipynb"
    nbformat.write(cut_puzzles(nbformat.read(str(source), as_version=4)), str(source))
    nbgrader(course, env, "generate_assignment", "puzzles", "--force")
    return course, nbformat.read(str(course / "release" / "puzzles" / "puzzles.ipynb"), as_version=4)


@dataclass(frozen=True)
class Template:
    """A course made once (`make_course`) and the database its assignment was generated into."""
    course: Path
    release: nbformat.NotebookNode
    database: str

    def copy(self, dest: Path) -> tuple[Path, nbformat.NotebookNode]:
        """The course copied to ``dest`` (its gradebook: a copy of ``database``); it and the released notebook."""
        shutil.copytree(self.course, dest, symlinks=True)
        return dest, self.release


def submit(course: Path, release: nbformat.NotebookNode, student: str, answers: dict[str, str]) -> Path:
    present = {c.metadata.nbgrader["grade_id"] for c in release.cells if is_solution(c)}
    kept = {k: v for k, v in answers.items() if k in present}
    return submissions.write(course, student, "puzzles", submissions.fill(release, kept))


def class_of(n: int) -> list[tuple[str, dict[str, str], float]]:
    """``n`` students cycling through the kinds: (student, answers, expected total)."""
    return [(f"{KINDS[i % len(KINDS)][0]}-{i:02d}", KINDS[i % len(KINDS)][1](), KINDS[i % len(KINDS)][2])
            for i in range(n)]


def formgrader_submissions(course: Path, env: dict[str, str], assignment: str = "puzzles") -> dict[str, dict]:
    """Each student's submission of ``assignment`` as nbgrader's formgrader serves it (its submissions API:
    ``score``, ``autograded``, ...), from a Jupyter server started in ``course`` with ``env`` (which names the
    gradebook it reads)."""
    import json
    import secrets
    import tempfile
    import time
    import urllib.request

    from workshop.fleet.local import free_port
    port, token = free_port(), secrets.token_hex(16)
    log = tempfile.TemporaryFile("w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course}"],
        cwd=course, env={**nbg.nbgrader_env(), **env}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/formgrader/api/submissions/{assignment}"
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    return {s["student"]: s for s in json.load(answer)}
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"formgrader did not answer at {url}:\n{log.read()[-3000:]}")
                time.sleep(0.5)
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
