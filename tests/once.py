"""Test data built once per test run, also when pytest-xdist runs the tests in several worker processes."""
from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``build(folder)`` makes, made once per run. Under pytest-xdist it lies in the temporary
    folder the workers share: the first worker to ask builds it while the others wait (a file lock), and they
    all use the same one, so no test may change it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name) / name
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent   # this run's folder, above each worker's own
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # held until the file is closed
        if not folder.exists():
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)   # the next worker to ask tries again
                raise
    return folder
