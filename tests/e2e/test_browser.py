"""What students and TAs see, in a real browser: the released notebooks open in JupyterLab, and the feedback
page shows the chart of a graded ladder. Headless Chromium (Debian's ``chromium``) and a JupyterLab server,
both on 127.0.0.1 only; every other host name resolves to nothing. Skipped without Chromium."""
from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from nbconvert import HTMLExporter
from nbformat.v4 import new_notebook
from timed_results import graded_cell, timed

from gradebook.feedback import PerformanceFeedback

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")]
LOCAL_ONLY = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
              "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
              "--no-pings", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


def chromium(*args: str, timeout_s: float = 120) -> str:
    """Run headless Chromium with ``args``; its stdout."""
    done = subprocess.run([CHROMIUM, *LOCAL_ONLY, *args], capture_output=True, text=True, timeout=timeout_s)
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(released, tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 over the released puzzles and gemm notebooks (conftest.py's `released`)."""
    course = tmp_path_factory.mktemp("browser-course")
    for assignment in ("puzzles", "gemm"):
        shutil.copytree(released[assignment] / "release" / assignment, course / "release" / assignment)
    port, token = free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course / 'release'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start")
        yield base, token
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize("assignment, words", [
    ("puzzles", ["Map", "YOUR CODE HERE"]),
    ("gemm", ["sgemm_naive"]),
])
def test_a_released_notebook_opens_in_jupyterlab(lab, assignment, words):
    base, token = lab
    dom = chromium("--virtual-time-budget=30000", "--dump-dom",
                   f"{base}/lab/tree/{assignment}/{assignment}.ipynb?token={token}")
    assert "jp-Notebook" in dom and "jp-Cell" in dom, dom[-2000:]
    for word in words:
        assert word in dom, word


def test_the_feedback_page_shows_the_chart_in_a_browser(tmp_path):
    """The feedback HTML of a graded ladder (gradebook.feedback) as Chromium renders it: the chart decodes."""
    nb = new_notebook(cells=[graded_cell("naive_score", [timed("naive", 0.131)]),
                             graded_cell("padded_score", [timed("padded", 0.846)])])
    nb, _ = PerformanceFeedback().preprocess(nb, {})
    body, _ = HTMLExporter().from_notebook_node(nb)
    probe = ("<script>window.addEventListener('load', () => document.body.setAttribute('data-chart-width', "
             "[...document.images].filter(i => i.src.startsWith('data:image/png'))"
             ".map(i => i.naturalWidth).join(',')))</script></body>")
    page = tmp_path / "feedback.html"
    page.write_text(body.replace("</body>", probe))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    widths = dom.split('data-chart-width="', 1)[1].split('"', 1)[0]
    assert widths and all(int(w) > 100 for w in widths.split(",")), widths
    shot = tmp_path / "feedback.png"
    chromium("--window-size=1200,1600", f"--screenshot={shot}", page.as_uri())
    import matplotlib.image
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] == 1600 and pixels.std() > 0.05    # a page with content, not a blank one
