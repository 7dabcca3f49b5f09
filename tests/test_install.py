"""The README's install resolves where pip finds PyPI's own torch: on Linux that is the CUDA build, whose
requirements pin triton and the CUDA wheels (cuda-toolkit's) that this project pins too. This machine's pip takes
a local CPU build of torch (no such requirements), so the suite's own install cannot show such a conflict: pip's
resolver runs here on PyPI's metadata alone (``--dry-run``, ``--isolated`` of this machine's pip settings)."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from graders.settings import PACKAGE_ROOT as ROOT

pytestmark = pytest.mark.slow
PYPI = "pypi.org"


def _reachable(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=10).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="PyPI's CUDA build of torch is Linux's")
def test_the_pins_resolve_against_pypis_torch():
    if not _reachable(PYPI):
        pytest.skip(f"{PYPI} cannot be reached from here")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                           "--index-url", f"https://{PYPI}/simple", "--editable", str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    would = done.stdout.rsplit("Would install ", 1)[-1].split()
    assert "torch-2.13.0" in would and any(name.startswith("nvidia-cudnn") for name in would), would   # the CUDA build
