"""What students and TAs see, in a real browser: the released notebooks open in JupyterLab, the feedback page
shows the chart of a graded ladder, and a failure reason reads whole, wrapped within the page, in formgrader and
in the feedback page, whose summary names each graded cell. Headless Chromium (Debian's ``chromium``) and
JupyterLab servers, all on 127.0.0.1 only; every other host name resolves to nothing. Skipped without Chromium."""
from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import websocket
from nbconvert import HTMLExporter
from nbformat.v4 import new_notebook
from nbgrader_course import CourseCopy
from timed_results import graded_cell, timed

from gradebook.feedback import PerformanceFeedback
from gradebook.summary import failure_messages
from graders.numba_engine import catalogue
from workshop import course as nbg
from workshop import submissions

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


def until(check, what: str, timeout_s: float = 60):
    """``check()``'s first true answer, asked every 0.2 s; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.2)
    return found


@contextlib.contextmanager
def jupyter_lab(root: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on 127.0.0.1 serving ``root`` and started in it (formgrader reads the course
    there): (its URL, its token)."""
    port, token = free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            return True
        except OSError:
            return False

    try:
        until(answers, "JupyterLab answering")
        yield base, token
    finally:
        server.terminate()
        server.wait(timeout=30)


class Browser:
    """Headless Chromium driven over its DevTools protocol (websocket-client, which jupyter_server brings): `open`
    a page in a window of the given size, then `evaluate` JavaScript in it."""

    def __init__(self, folder: Path, width: int, height: int):
        self.stderr = folder / "chromium.log"
        with self.stderr.open("w") as log:
            self.process = subprocess.Popen(
                [CHROMIUM, *LOCAL_ONLY, "--remote-debugging-port=0", f"--user-data-dir={folder / 'profile'}",
                 f"--window-size={width},{height}", "about:blank"], stdout=subprocess.DEVNULL, stderr=log)
        try:
            port = until(lambda: re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", self.stderr.read_text()),
                         "Chromium's DevTools endpoint")[1]
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
            page = next(t for t in targets if t["type"] == "page")
            self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        except BaseException:
            self.process.kill()
            self.process.wait()
            raise
        self.calls = 0

    def _call(self, method: str, **params) -> dict:
        self.calls += 1
        self.socket.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while (answer := json.loads(self.socket.recv())).get("id") != self.calls:
            pass   # an event
        assert "error" not in answer, answer
        return answer["result"]

    def evaluate(self, expression: str):
        """The JSON value of ``expression`` in the page."""
        result = self._call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def open(self, url: str) -> None:
        """Go to ``url`` and wait until it has loaded (the page before is marked, not to be taken for it)."""
        self.evaluate("window.previousPage = true")
        self._call("Page.navigate", url=url)
        until(lambda: self.evaluate("!window.previousPage && document.readyState === 'complete'"), f"{url} loaded")

    def close(self) -> None:
        self.socket.close()
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[Browser]:
    """Chromium in a laptop's window, 1024 x 768."""
    driven = Browser(tmp_path_factory.mktemp("chromium"), 1024, 768)
    yield driven
    driven.close()


@pytest.fixture(scope="module")
def lab(released, tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 over the released puzzles and gemm notebooks (conftest.py's `released`)."""
    course = tmp_path_factory.mktemp("browser-course")
    for assignment in ("puzzles", "gemm"):
        shutil.copytree(released[assignment] / "release" / assignment, course / "release" / assignment)
    with jupyter_lab(course / "release") as served:
        yield served


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


# What each failure the trusted grader wrote looks like on a page: its text, and whether any of it lies past its
# own box or the window's right edge (where a reader would have to scroll to find it, or cannot).
FAILURES_SHOWN = """[...document.querySelectorAll('.output_error pre')].map(pre => ({
    text: pre.innerText,
    clipped: pre.scrollWidth > pre.clientWidth || pre.getBoundingClientRect().right > window.innerWidth}))"""
STUDENT = "mistakes"   # a wrong Guards kernel (an out-of-bounds read) and Pooling over its limits in both cases


@pytest.fixture(scope="module")
def graded(released_puzzles, tmp_path_factory) -> CourseCopy:
    """A course with `STUDENT`'s submission autograded and its feedback generated, by real nbgrader."""
    course = CourseCopy(released_puzzles.root, tmp_path_factory.mktemp("readable") / "course")
    course.submit(STUDENT, submissions.wrong_answers("guard_missing", "pooling_global_reads"))
    course.autograde(STUDENT)
    nbg.nbgrader(course.root, "generate_feedback", "puzzles", f"--student={STUDENT}")
    return course


def assert_readable(browser: Browser, failures: dict[str, str]) -> None:
    """Every failure of the autograded notebook is on the page whole (its words in order, wrapped however the
    page wraps them) and none runs past its box or the window."""
    shown = browser.evaluate(FAILURES_SHOWN)
    assert shown and not [f for f in shown if f["clipped"]], shown
    texts = {" ".join(f["text"].split()) for f in shown}
    for grade_id, failure in failures.items():
        assert " ".join(failure.split()) in texts, (grade_id, failure, texts)
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_failure_reason_reads_whole_in_formgrader(graded, browser):
    failures = failure_messages(graded.root / "autograded" / STUDENT / "puzzles" / "puzzles.ipynb")
    assert "out-of-bounds read of a[" in failures["guard_correct"]
    assert "case 2 of 2 (a[5]; " in failures["pooling_limits"]
    with jupyter_lab(graded.root) as (base, token):
        listed = json.load(urllib.request.urlopen(
            f"{base}/formgrader/api/submitted_notebooks/puzzles/puzzles?token={token}", timeout=30))
        (submission,) = [s["id"] for s in listed if s["student"] == STUDENT]
        browser.open(f"{base}/formgrader/submissions/{submission}/?token={token}")
        assert_readable(browser, failures)


def test_a_failure_reason_reads_whole_in_the_feedback_whose_summary_names_each_cell(graded, browser):
    failures = failure_messages(graded.root / "autograded" / STUDENT / "puzzles" / "puzzles.ipynb")
    browser.open((graded.root / "feedback" / STUDENT / "puzzles" / "puzzles.html").as_uri())
    assert_readable(browser, failures)
    summary = browser.evaluate("[...document.querySelectorAll('#toc a')].map(a => a.innerText)")
    assert len(summary) == 2 * len(catalogue.PUZZLES) and "Test cell" not in summary
    assert summary[4:6] == ["Puzzle 3: Guards — correct on fresh inputs and more sizes",
                            "Puzzle 3: Guards — within the access limits"]
