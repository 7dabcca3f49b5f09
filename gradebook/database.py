"""The gradebook's database as nbgrader makes it, made so from an environment that is not activated.

nbgrader creates a new gradebook's tables, then runs the ``alembic`` script by name (``nbgrader.api``'s
``get_alembic_version``) to learn the schema version it stamps in ``alembic_version``. ``.venv/bin/nbgrader``
run without activating the venv finds no ``alembic`` on PATH: the command fails after the tables exist, and the
next run sees tables and never stamps the version (``nbgrader db upgrade`` then fails). `alembic_on_path`
prevents that; `stamp_unversioned` repairs a SQLite gradebook left so by an earlier run.
"""
from __future__ import annotations

import os
import sqlite3
import sys
from contextlib import closing
from pathlib import Path


def alembic_on_path() -> None:
    """Put the running interpreter's scripts folder (a venv's ``bin``, where pip installed ``alembic`` beside
    ``nbgrader``) first on this process's PATH, for nbgrader's ``alembic`` subprocess."""
    scripts = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if scripts not in path.split(os.pathsep):
        os.environ["PATH"] = scripts + (os.pathsep + path if path else "")


def sqlite_path(url: str, course: Path) -> Path | None:
    """The file of a SQLite gradebook URL (a relative one is in ``course``, where nbgrader runs), else None."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    return path if path.is_absolute() else course / path


def stamp_unversioned(url: str, course: Path) -> str | None:
    """Stamp a SQLite gradebook that has nbgrader's tables but no ``alembic_version`` with the version nbgrader
    stamps on a new one; returns that version, or None when there was nothing to repair."""
    path = sqlite_path(url, course)
    if path is None or not path.is_file():
        return None
    with closing(sqlite3.connect(path)) as db, db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "assignment" not in tables or "alembic_version" in tables:
            return None
        from nbgrader.api import get_alembic_version
        version = get_alembic_version()
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        db.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (version,))
    return version
