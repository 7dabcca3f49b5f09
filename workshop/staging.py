"""Copies of this checkout that hold only what one role needs, from the files git tracks (a file not committed
yet is left out): a grading worker's (the images' build context, ``docker/context.py``) and a student's
(``workshop student-kit``). Standard library only: ``docker/context.py`` runs it without the venv.

Both hold the code packages, ``pyproject.toml`` and ``jupyter-config/`` (to be installed), and of each track only
its grader files (`graders.tracks.GRADER_FILES`: ``spec.toml``, ``structure.toml``, ``problem.py``): what a
notebook's check and a grading child read. A worker's adds the course config ``nbgrader_config.py`` and the
reference solutions that a counter rule profiles beside the student's kernel (``counter.relative_to`` in a CUDA
spec: the grader runs that reference) and each quiz's answer key (``tracks/<quiz>/key.py``: `graders.quiz_engine`).
No other solution, no source notebook, no gradebook, no benchmark record.
"""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

from graders import tracks
from graders.settings import PACKAGE_ROOT as ROOT

CODE = ("graders", "gradebook", "workshop")
INSTALL = ("pyproject.toml", "jupyter-config")


def counter_references(spec_path: Path) -> list[Path]:
    """The reference sources a spec's counter rules profile (``[[kernel]] counter.relative_to``), read from the
    TOML alone (`graders.cuda_engine.spec` checks that each names a kernel with a reference)."""
    kernels = {k["id"]: k for k in tomllib.loads(spec_path.read_text()).get("kernel", [])}
    named = {k["counter"]["relative_to"] for k in kernels.values() if "counter" in k}
    return sorted((spec_path.parent / kernels[name]["reference"]).resolve() for name in named)


def tracked(*paths: str) -> set[str]:
    return set(subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.split())


def student_files() -> list[Path]:
    """The repository-relative paths of a student's copy."""
    chosen = {Path(p) for p in tracked(*CODE, *INSTALL) if not p.endswith((".ipynb", ".db"))}
    return sorted(chosen | {Path(p) for p in tracked(*(f"tracks/*/{name}" for name in tracks.GRADER_FILES))})


def worker_files() -> list[Path]:
    """The repository-relative paths of a grading worker's copy."""
    chosen = set(student_files()) | {Path("nbgrader_config.py")} | {Path(p) for p in tracked("tracks/*/key.py")}
    for spec in (p for p in list(chosen) if p.name == "spec.toml"):
        chosen |= {path.relative_to(ROOT) for path in counter_references(ROOT / spec)}
    return sorted(chosen)


def solutions(paths: list[Path]) -> list[Path]:
    return [p for p in paths if "solutions" in p.parts]


def stage(dest: Path, paths: list[Path]) -> list[Path]:
    """Copy ``paths`` (repository-relative) into ``dest``, a folder made for them; returns them."""
    dest.mkdir(parents=True)
    for rel in paths:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return paths
