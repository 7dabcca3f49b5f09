"""Drive nbgrader's own CLI in a course directory (the repository root, or a scratch copy of it)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
import sys
from pathlib import Path

from graders.settings import ROOT


def nbgrader_env() -> dict[str, str]:
    """nbgrader runs the ``alembic`` script to create a gradebook: this interpreter's bin goes on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course``; on failure (with ``check``) raise with nbgrader's own log."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc


def make_course(dest: Path, assignments: list[str]) -> Path:
    """A scratch course directory: this repo's nbgrader config and the named source assignments."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    for name in assignments:
        shutil.copytree(ROOT / "assignments" / name, dest / "assignments" / name, dirs_exist_ok=True)
    return dest


def add_student(course: Path, student: str, first: str, last: str) -> None:
    nbgrader(course, "db", "student", "add", student, f"--first-name={first}", f"--last-name={last}")


def release(course: Path, assignment: str):
    """``nbgrader generate_assignment``; returns the released (student) notebook."""
    import nbformat
    nbgrader(course, "generate_assignment", assignment, "--force")
    return nbformat.read(str(course / "release" / assignment / f"{assignment}.ipynb"), as_version=4)


def autograde(course: Path, assignment: str, student: str) -> float:
    """``nbgrader autograde`` one student's submission; returns the seconds it took."""
    start = time.monotonic()
    nbgrader(course, "autograde", assignment, f"--student={student}", "--force")
    return time.monotonic() - start
