"""The README followed literally: its install line, then the Student, TA and Instructor sections' command lines,
read from README.md's fenced blocks and run in order, on a fresh copy of the checkout (the files git tracks, as
they are in the working tree), in a clean environment (no WORKSHOP_* setting, a home of its own). Any failing
command, traceback or warning fails the test, except the few lines of other projects listed in `UPSTREAM`.

Each role has one bash process, fed one line at a time, so that ``source``, ``cd`` and exports carry over. The TA
and the student take turns as the course runs: the TA releases, the student fetches, works, validates and submits,
the TA collects, grades and releases feedback, the student fetches it, the instructor exports (in the TA's shell).
Between the student's ``jupyter lab`` and ``nbgrader validate`` the test writes the reference kernels into the
fetched notebook (the student's work). ``jupyter lab`` runs as a session (tests/e2e/lab_session.py): the server
starts, a kernel starts and goes idle, formgrader answers, the server stops; the user's Jupyter config, written
here, gives it a port, a token and, as root, ``allow_root``.

The install line's ``python3 -m venv .venv && .venv/bin/pip install -e .`` is the one step not run as written: the
venv reuses this test run's installed packages (a ``.pth`` file and the console scripts) so that nothing is
downloaded, and the project itself is installed as written, editable and without dependencies.
"""
from __future__ import annotations

import os
import pwd
import queue
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from graders.numba_engine import catalogue
from graders.settings import PACKAGE_ROOT as ROOT
from workshop import submissions
from workshop.fleet.local import free_port

pytestmark = pytest.mark.slow

PLACEHOLDER = "/path/to/kernel-workshop"   # the Student section's course checkout
LAB_SESSION = Path(__file__).with_name("lab_session.py")
# Lines of other projects' output that are not the project's doing: (pattern, why it is expected).
UPSTREAM = [
    (r"ServerApp\] \s*$|To access the server, open this file in a browser|file:///.*jpserver-\d+-open\.html"
     r"|Or copy and paste one of these URLs|https?://(localhost|127\.0\.0\.1):\d+/lab\?token=",
     "jupyter_server prints how to reach it at level CRITICAL"),
    (r"received signal 15, stopping", "jupyter_server's shutdown on SIGTERM (the session's end), at level CRITICAL"),
    (r"The websocket_ping_timeout \(90000\) cannot be longer than the websocket_ping_interval \(30000\)",
     "tornado on jupyter_server's own default ping timeout (3 x its interval), at each websocket"),
]
PROBLEM = re.compile(r"Traceback|warning|\bERROR\b|\berror:|\[(W|E|C) \d{4}-|\| (WARNING|ERROR|CRITICAL)\]",
                     re.IGNORECASE)


def section(markdown: str, title: str | None) -> str:
    """The text of ``## title`` up to the next ``## `` heading; None: the text before the first."""
    parts = re.split(r"^## ", markdown, flags=re.MULTILINE)
    if title is None:
        return parts[0]
    found = [p for p in parts[1:] if p.split("\n", 1)[0].strip() == title]
    assert len(found) == 1, f"README.md has no single section '## {title}'"
    return found[0]


def blocks(text: str, language: str) -> list[list[str]]:
    """The non-empty lines of each fenced block of ``language`` in ``text``."""
    return [[line for line in body.splitlines() if line.strip()]
            for body in re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)]


class Shell:
    """One bash process fed one line at a time; each line's exit status, output and seconds. A line that fails
    fails the test."""

    def __init__(self, cwd: Path, env: dict[str, str], record: list[tuple[str, int, str, float]]):
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.proc.stdout], daemon=True).start()
        self.record = record   # (command, exit status, output, seconds) of every line run, shared by the shells

    def run(self, command: str, timeout: float = 300) -> str:
        marker = f"__done_{secrets.token_hex(8)}__"
        start = time.monotonic()
        self.proc.stdin.write(f"{{ {command}\n}} < /dev/null\n__rc=$?; echo; echo {marker} $__rc\n")
        self.proc.stdin.flush()
        out = []
        while True:
            line = self.lines.get(timeout=max(1.0, timeout - (time.monotonic() - start)))
            if line.startswith(marker):
                rc = int(line.split()[1])
                break
            out.append(line)
        text = "".join(out)
        self.record.append((command, rc, text, time.monotonic() - start))
        assert rc == 0, f"$ {command}\nexit {rc}\n{text[-6000:]}"
        return text

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def copy_checkout(dest: Path) -> None:
    """The files git tracks, as they are in the working tree (a fresh clone of what would be committed)."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def shared_venv(course: Path) -> None:
    """``python3 -m venv .venv`` whose packages are this test run's: a ``.pth`` adds its site-packages (their own
    ``.pth`` files too), its console scripts are copied with the new interpreter; Jupyter's data (kernelspecs,
    JupyterLab's assets) is linked, its config copied."""
    venv = course / ".venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    site = venv / purelib.relative_to(sys.prefix)
    (site / "_shared_site.pth").write_text(f"import site; site.addsitedir({str(purelib)!r})\n")
    ours = Path(sys.prefix) / "bin"
    for script in ours.iterdir():
        target = venv / "bin" / script.name
        if target.exists() or not script.is_file():
            continue
        head, _, rest = script.read_bytes().partition(b"\n")
        if re.fullmatch(rb"#!" + re.escape(bytes(ours)) + rb"/python[\d.]*", head):
            target.write_bytes(f"#!{venv / 'bin' / 'python'}\n".encode() + rest)
            target.chmod(0o755)
    (venv / "share").symlink_to(Path(sys.prefix) / "share")
    shutil.copytree(Path(sys.prefix) / "etc", venv / "etc", symlinks=True,
                    ignore=shutil.ignore_patterns("jupyter_config.py", "nbgrader_config.py"))


def clean_env(home: Path) -> dict[str, str]:
    """The environment of someone who just opened a shell: no setting of the test run's, its venv not on PATH."""
    drop = ("WORKSHOP_", "NUMBA_", "PYTEST_", "JUPYTER", "PYTHON", "VIRTUAL_ENV", "JPY_", "NBGRADER")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    env["HOME"] = str(home)
    return env


def problems(text: str) -> list[str]:
    """The lines of ``text`` that look like a traceback, an error or a warning and are not in `UPSTREAM`."""
    return [line for line in text.splitlines()
            if PROBLEM.search(line) and not any(re.search(pattern, line) for pattern, _ in UPSTREAM)]


def until(lines: list[str], prefix: str) -> list[str]:
    """Pop and return the lines before the first that starts with ``prefix`` (which must be there)."""
    index = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    taken = lines[:index]
    del lines[:index]
    return taken


def test_the_readme_as_written(tmp_path):
    start = time.monotonic()
    course, home = tmp_path / "kernel-workshop", tmp_path / "home"
    copy_checkout(course)
    readme = (course / "README.md").read_text()
    install, = [b for b in blocks(section(readme, None), "bash") if b[0].startswith("python3 -m venv")]
    venv_line, *rest = [c.split("#")[0].strip() for c in install[0].split(" && ")]
    assert (venv_line, rest[0]) == ("python3 -m venv .venv", ".venv/bin/pip install -e ."), install[0]
    student = blocks(section(readme, "Student"), "bash")[0]
    ta = blocks(section(readme, "TA"), "bash")[0]
    instructor, = blocks(section(readme, "Instructor"), "bash")
    snippet, = blocks(section(readme, "Instructor"), "python")
    assert sum(PLACEHOLDER in line for line in student) == 1
    student = [line.replace(PLACEHOLDER, str(course)) for line in student]

    shared_venv(course)
    port, token = free_port(), secrets.token_hex(16)
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "jupyter_server_config.py").write_text(
        f"c.ServerApp.port = {port}\nc.ServerApp.port_retries = 0\nc.IdentityProvider.token = {token!r}\n"
        f"c.ServerApp.open_browser = False\nc.ServerApp.allow_root = {os.geteuid() == 0}\n")
    env = {**clean_env(home), "LAB_PORT": str(port), "LAB_TOKEN": token}
    ran: list[tuple[str, int, str, float]] = []
    ta_shell, student_shell = Shell(course, env, ran), Shell(home, env, ran)
    lab = f'jupyter() {{ if [ "$1" = lab ]; then shift; python {LAB_SESSION} "$@"; else command jupyter "$@"; fi; }}'
    for shell in (ta_shell, student_shell):
        shell.run(lab)
    ta_shell.run(".venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .")
    ran.clear()   # not README lines: the helper, and pip's and setuptools' output
    try:
        setup = [c for c in rest[1:] if "workshop demo" not in c]   # the demo has tests of its own
        for line in [" && ".join(setup), *[c for c in install[1:] if "workshop demo" not in c and "-m pytest" not in c]]:
            ta_shell.run(line)
        for line in until(ta, "nbgrader collect"):
            ta_shell.run(line)
        for line in until(student, "nbgrader fetch_feedback"):
            student_shell.run(line)
            if line.startswith("jupyter lab"):   # the student writes the kernels
                path = Path(student_shell.run("pwd").strip()) / "puzzles" / "puzzles.ipynb"
                ran.pop()
                nb = nbformat.read(str(path), as_version=4)
                nbformat.write(submissions.fill(nb, submissions.reference_answers()), str(path))
        for line in ta + instructor + ["python - <<'PY'\n" + "\n".join(snippet) + "\nPY"]:
            ta_shell.run(line)
        for line in student:
            student_shell.run(line)
    finally:
        ta_shell.close()
        student_shell.close()

    report = "\n".join(f"{seconds:6.1f} s  rc {rc}  {command.splitlines()[0]}" for command, rc, _, seconds in ran)
    print(f"\n{report}\n{time.monotonic() - start:.0f} s in all")
    noisy = [(command, problems(out)) for command, _, out, _ in ran if problems(out)]
    assert not noisy, "\n\n".join(f"$ {c}\n" + "\n".join(lines) for c, lines in noisy)

    total, login = 3 * len(catalogue.PUZZLES), pwd.getpwuid(os.getuid()).pw_name   # nbgrader's student id
    grades = pd.read_csv(course / "grades.csv", dtype={"student_id": str}).set_index("student_id")
    assert grades.loc[login, "raw_score"] == total and grades.loc["alice", "raw_score"] == 0
    assert (course / "grades-detail.csv").is_file()
    assert list((home / "kernel-workshop-work" / "puzzles" / "feedback").glob("*/puzzles.html"))
    student_lab, ta_lab = [out for command, _, out, _ in ran if command.startswith("jupyter lab")]
    listed = re.findall(r"^formgrader: .*$", ta_lab, flags=re.MULTILINE)
    assert f"formgrader: puzzles released, 1 submission(s), max {total}" in listed
    assert all(line.endswith(", 0 submission(s), max 0") for line in listed if " puzzles " not in line), listed
    assert "kernel: ran print(6 * 7)" in student_lab and "kernel: ran print(6 * 7)" in ta_lab
