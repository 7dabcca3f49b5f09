"""Fixtures the engine tests share."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from graders.settings import ROOT


@pytest.fixture(scope="session")
def fake_env(tmp_path_factory) -> dict[str, str]:
    """PYTHONPATH for the stand-in grading children (perf_fakes/): a copy of the folder outside the checkout, since
    a sandbox shows nothing of the checkout but its graders/ and the tracks' grader files, whatever PYTHONPATH
    names."""
    folder = tmp_path_factory.mktemp("perf_fakes")
    shutil.copytree(Path(__file__).parent / "perf_fakes", folder, dirs_exist_ok=True)
    return {"PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
