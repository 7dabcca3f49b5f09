"""The gradebook nbgrader makes from a venv that is not activated: `.venv/bin/nbgrader` finds ``alembic`` (the
course's config puts the venv's bin on PATH), and a gradebook an earlier run left without its schema version is
stamped (`gradebook.database`)."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from nbgrader.api import Gradebook, get_alembic_version

from gradebook.database import alembic_on_path, stamp_unversioned
from workshop.course import make_course


def versions(db: Path) -> list[tuple[str]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchall()


def test_an_unactivated_venvs_nbgrader_makes_a_whole_gradebook(tmp_path):
    course = make_course(tmp_path / "course", ["vecadd"])
    proc = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "generate_assignment", "vecadd"],
                          cwd=course, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    alembic_on_path()   # for this process's get_alembic_version
    assert "Traceback" not in proc.stderr and versions(course / "gradebook.db") == [(get_alembic_version(),)]


def test_a_gradebook_left_without_its_version_is_stamped_once(tmp_path):
    alembic_on_path()
    Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}").close()
    with closing(sqlite3.connect(tmp_path / "gradebook.db")) as conn, conn:
        conn.execute("DROP TABLE alembic_version")   # as nbgrader leaves it when `alembic` is not found
    head = get_alembic_version()
    assert stamp_unversioned("sqlite:///gradebook.db", tmp_path) == head
    assert versions(tmp_path / "gradebook.db") == [(head,)]
    assert stamp_unversioned("sqlite:///gradebook.db", tmp_path) is None
    assert stamp_unversioned(f"sqlite:///{tmp_path / 'absent.db'}", tmp_path) is None
    assert stamp_unversioned("postgresql+psycopg://ta@db/course", tmp_path) is None
