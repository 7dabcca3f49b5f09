"""A GPU worker's folders for what it keeps across its grading processes (each submission is graded by an nbgrader
process of its own): the trusted grader's, out of every sandbox's sight unless a child is given one on purpose.
(Read here, not in `graders.settings`, whose hash the measured targets carry.)"""
from __future__ import annotations

import os
from pathlib import Path


def worker_folder(variable: str, name: str) -> Path:
    """The folder the environment variable ``variable`` names, else ``$XDG_CACHE_HOME/kernel-workshop/<name>``
    (``~/.cache/...``)."""
    chosen = os.environ.get(variable, "").strip()
    return Path(chosen) if chosen else (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                        / "kernel-workshop" / name)
