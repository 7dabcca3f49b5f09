"""Process trees: the sandboxes nbgrader starts run in sessions of their own, so a process group does not
reach them; killing a grading means killing every process below it."""
from __future__ import annotations

import os
import signal
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue   # the process ended while we looked
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(0), [])
        found += below
        todo += below
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it, found before any is killed (an orphan is not found)."""
    for victim in [pid, *descendants(pid)]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
