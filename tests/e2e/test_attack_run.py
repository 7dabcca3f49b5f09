"""Hostile submissions in ONE real ``nbgrader autograde`` run (puzzles, simulator), between two honest students:
what each earns, what nbgrader's own process holds while it grades them, and what leaks.

Students, graded in this order (nbgrader grades them sorted by name): ``aa-honest`` (the reference answers),
one student per attack file ``attacks/run/<stem>.py`` named after its stem, ``zz-honest`` (the reference
answers again). An attack file is a cell file as ``attacks/hostile.py``: ``# %% ID`` replaces solution cell ID,
``# %% ID+`` appends to the reference cell ID, ``# %% file:NAME`` is a file handed in beside the notebook, and
its ``# expect:`` line gives the points it must get (a test cell it does not name: full marks). Its text may use

- ``$ROOT``: this checkout; ``$COURSE``: the course directory; ``$PORT``: a TCP listener on 127.0.0.1;
  ``$MARKER``: a string unique to this run (no process carrying it may outlive the grading);
- ``$EXCHANGE``: the course's nbgrader exchange (``c.Exchange.root``), outside the course and outside /tmp,
  where a classmate's submission lies as ``nbgrader submit`` puts it:
  ``$EXCHANGE/kernel-workshop/inbound/classmate+puzzles+<timestamp>+<random>/puzzles.ipynb``;
- ``$COPY``: a folder outside the course and outside /tmp holding a copy of this project's ``tracks/``
  (``$COPY/tracks/puzzles/solutions/reference.py`` and the rest, solutions included).

The classmate's notebook and the copy's puzzles reference hold secret strings that must reach no autograded
notebook and no feedback. nbgrader's peak memory while it grades the attackers may exceed its memory after
the first honest student by at most `HEADROOM`; both honest students get full marks, cell for cell the same.
"""
from __future__ import annotations

import datetime
import os
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbgrader_course import CourseCopy, unmet
from processes import processes_with
from test_attacks import Listener, _fingerprint, _grader_files

from graders.numba_engine import catalogue
from graders.tracks import expected_points
from workshop import course as nbg
from workshop import submissions
from workshop.cells import read_cells
from workshop.fleet.coordinator import course_config

pytestmark = pytest.mark.slow
RUN = Path(__file__).parent / "attacks" / "run"
ATTACKS = sorted(p.stem for p in RUN.glob("*.py"))
FIRST, LAST = "aa-honest", "zz-honest"
STUDENTS = [FIRST, *ATTACKS, LAST]
TOTAL = 3 * len(catalogue.PUZZLES)
HEADROOM = 256 << 20                 # bytes nbgrader's process may grow by while it grades the attackers
DEADLINE_S = 300 + 120 * len(STUDENTS)   # the whole autograde, after which it is killed (a hang, not a bound)
MARKER = f"kw-attack-run-{uuid.uuid4().hex[:12]}"
EXCHANGE_SECRET = f"kw-exchange-secret-{uuid.uuid4().hex}"
COPY_SECRET = f"kw-copy-secret-{uuid.uuid4().hex}"

# nbgrader's log with its timestamps to the millisecond; a student's grading begins and ends with these lines
LOG_FORMAT = "--NbGrader.log_format=%(asctime)s.%(msecs)03d [%(name)s | %(levelname)s] %(message)s"
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \[\w+ \| \w+\] (.*)$")
BEGINS = re.compile(r"Creating/updating student with ID '([^']+)'")
ENDS = "Setting destination file permissions"


def _memory(pid: int) -> dict[str, int | None]:
    """VmRSS and VmHWM (the peak since the last reset) of a process, in bytes; None once it has ended."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        text = ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) << 10 if name in fields else None for name in ("VmRSS", "VmHWM")}


@dataclass
class Grading:
    """One student's grading as the log and nbgrader's memory saw it."""

    began: datetime.datetime
    rss_before: int | None               # nbgrader's resident memory when the student's grading began
    ended: datetime.datetime | None = None
    peak: int | None = None              # its peak resident memory while grading the student
    rss_after: int | None = None

    @property
    def seconds(self) -> float | None:
        return (self.ended - self.began).total_seconds() if self.ended else None


@dataclass
class WatchedAutograde:
    """``nbgrader autograde ASSIGNMENT --force`` for every submitted student, with each student's grading
    timed from nbgrader's log and its peak memory read from the kernel (``VmHWM``, reset at each student's
    first log line through ``/proc/PID/clear_refs``)."""

    course: Path
    assignment: str
    gradings: dict[str, Grading] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    returncode: int | None = None

    def run(self) -> None:
        proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", self.assignment, "--force",
                                 LOG_FORMAT], cwd=self.course, env=nbg.nbgrader_env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        watchdog = threading.Timer(DEADLINE_S, os.killpg, (proc.pid, signal.SIGKILL))
        watchdog.start()
        try:
            current = None
            for line in proc.stdout:
                self.log.append(line.rstrip("\n"))
                parsed = LOG_LINE.match(line)
                if not parsed:
                    continue
                stamp = datetime.datetime.strptime(parsed.group(1), "%Y-%m-%d %H:%M:%S.%f")
                begins = BEGINS.search(parsed.group(2))
                if (begins or ENDS in parsed.group(2)) and current:
                    memory = _memory(proc.pid)
                    grading = self.gradings[current]
                    grading.ended, grading.peak, grading.rss_after = stamp, memory["VmHWM"], memory["VmRSS"]
                    current = None
                if begins:
                    current = begins.group(1)
                    self.gradings[current] = Grading(stamp, _memory(proc.pid)["VmRSS"])
                    Path(f"/proc/{proc.pid}/clear_refs").write_text("5")   # VmHWM := VmRSS
            self.returncode = proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def table(self) -> str:
        """Each student's grading time and nbgrader's memory (MB) before, at its peak during, and after it."""
        rows = [f"{'student':<24} {'seconds':>8} {'RSS before':>11} {'peak RSS':>9} {'RSS after':>10}"]
        for student, g in self.gradings.items():
            cells = [f"{g.seconds:.1f}" if g.seconds is not None else "?",
                     *(f"{v >> 20}" if v is not None else "?" for v in (g.rss_before, g.peak, g.rss_after))]
            rows.append(f"{student:<24} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, (8, 11, 9, 10))))
        return "\n".join(rows)


def _exchange(root: Path, course: Path, release) -> Path:
    """``course``'s exchange at ``root``, holding a classmate's submission as ``nbgrader submit`` leaves it, with
    `EXCHANGE_SECRET` in a solution cell; returns the notebook."""
    inbound = root / course_config(course).CourseDirectory.course_id / "inbound"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    folder = inbound / f"classmate+puzzles+{stamp}+{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    answers = submissions.reference_answers()
    answers["map"] = f"# {EXCHANGE_SECRET}\n" + answers["map"]
    notebook = folder / "puzzles.ipynb"
    nbformat.write(submissions.fill(release, answers), str(notebook))
    (folder / "timestamp.txt").write_text(stamp)
    inbound.chmod(0o733)   # nbgrader's: students may submit into it, not list it
    return notebook


def _copy_of_tracks(root: Path) -> Path:
    """A copy of this project's tracks/ under ``root``, with `COPY_SECRET` in the puzzles' reference."""
    shutil.copytree(submissions.ROOT / "tracks", root / "tracks", ignore=shutil.ignore_patterns("__pycache__"))
    reference = root / "tracks" / "puzzles" / "solutions" / "reference.py"
    reference.write_text(reference.read_text() + f"\n# {COPY_SECRET}\n")
    return reference


def _answers(stem: str, fill: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(solution cells, files handed in beside the notebook) of attack ``stem``: the reference answers with the
    file's cells swapped in or appended."""
    answers, files = submissions.reference_answers(), {}
    for cell_id, source in read_cells(RUN / f"{stem}.py").items():
        source = string.Template(source).safe_substitute(fill)
        if cell_id.startswith("file:"):
            files[cell_id.removeprefix("file:")] = source + "\n"
        elif cell_id.endswith("+"):
            answers[cell_id[:-1]] += "\n\n" + source
        else:
            answers[cell_id] = source
    return answers, files


@dataclass(repr=False)
class Graded:
    """The course after the run, and what was watched while it ran."""

    course: CourseCopy
    autograde: WatchedAutograde
    feedback: subprocess.CompletedProcess
    feedback_s: float
    listener: Listener
    files_before: dict[str, str]
    files_after: dict[str, str]
    survivors: list[int]


@pytest.fixture(scope="module")
def graded(released_puzzles, tmp_path_factory):
    exchange = Path(tempfile.mkdtemp(prefix="kw-exchange-", dir="/var/tmp"))
    copy = Path(tempfile.mkdtemp(prefix="kw-copy-", dir="/var/tmp"))
    listener = Listener()
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("WORKSHOP_TARGET", "sim")         # as tests/e2e/test_attacks.py, also on a GPU worker
            env.setenv("WORKSHOP_KERNEL_TIMEOUT", "30")
            course = CourseCopy(released_puzzles.root, tmp_path_factory.mktemp("attack-run") / "course")
            with open(course.root / "nbgrader_config.py", "a") as config:
                config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
            _exchange(exchange, course.root, course.release)
            _copy_of_tracks(copy)
            fill = {"ROOT": str(submissions.ROOT), "COURSE": str(course.root), "PORT": str(listener.port),
                    "MARKER": MARKER, "EXCHANGE": str(exchange), "COPY": str(copy)}
            course.submit(FIRST, submissions.reference_answers())
            for stem in ATTACKS:
                answers, files = _answers(stem, fill)
                folder = course.submit(stem, answers).parent
                for name, text in files.items():
                    (folder / name).write_text(text)
            course.submit(LAST, submissions.reference_answers())

            def watched() -> list[Path]:
                outside = [p for p in (*exchange.rglob("*"), *copy.rglob("*")) if p.is_file()]
                return [*_grader_files(), course.root / "nbgrader_config.py", *outside]

            before = _fingerprint(watched())
            autograde = WatchedAutograde(course.root, course.assignment)
            autograde.run()
            survivors = processes_with(MARKER)
            after = _fingerprint(watched())
            start = time.monotonic()
            feedback = nbg.nbgrader(course.root, "generate_feedback", course.assignment, "--force", check=False)
            yield Graded(course, autograde, feedback, time.monotonic() - start, listener, before, after, survivors)
    finally:
        for pid in processes_with(MARKER):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        listener.server.close()
        shutil.rmtree(exchange, ignore_errors=True)
        shutil.rmtree(copy, ignore_errors=True)


def _verdicts(course: CourseCopy, student: str, cells) -> str:
    """What the autograded notebook shows for these graded cells."""
    nb = course.autograded(student)
    return "\n".join(f"{c.metadata.nbgrader.grade_id}: " + "".join(
        o.get("text", "") + o.get("evalue", "") + str(o.get("data", "")) for o in c.get("outputs", []))
        for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") in cells)


def test_one_autograde_grades_every_submission_between_the_honest_students(graded):
    """nbgrader grades students sorted by name: the honest ones first and last. Prints each student's grading
    time (from nbgrader's log) and nbgrader's memory."""
    run = graded.autograde
    print(f"\n{run.table()}\n(MB; generate_feedback for all: {graded.feedback_s:.1f} s)")
    assert run.returncode == 0, "\n".join(run.log[-40:])
    assert list(run.gradings) == STUDENTS
    assert all(g.ended for g in run.gradings.values()), run.table()


def test_the_honest_students_get_full_marks_cell_for_cell_the_same(graded):
    first, last = graded.course.scores(FIRST), graded.course.scores(LAST)
    assert sum(first.values()) == TOTAL, _verdicts(graded.course, FIRST, [c for c, s in first.items() if not s])
    assert last == first


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_earns_exactly_its_expected_points(graded, attack):
    scores = graded.course.scores(attack)
    assert set(scores) == set(graded.course.scores(FIRST))
    wrong = unmet(scores, expected_points(RUN / f"{attack}.py"))
    assert not wrong, f"{wrong}\n{_verdicts(graded.course, attack, wrong)}"


def test_nbgrader_grows_by_at_most_256_MB_while_it_grades_the_attackers(graded):
    gradings = graded.autograde.gradings
    baseline = gradings[FIRST].rss_after
    peaks = {attack: gradings[attack].peak for attack in ATTACKS}
    assert baseline and None not in peaks.values(), graded.autograde.table()
    over = {attack: peak for attack, peak in peaks.items() if peak > baseline + HEADROOM}
    assert not over, f"nbgrader's RSS after {FIRST}: {baseline >> 20} MB\n{graded.autograde.table()}"


def test_no_secret_reaches_an_autograded_notebook_or_feedback(graded):
    assert graded.feedback.returncode == 0, graded.feedback.stdout + graded.feedback.stderr
    files = [p for folder in ("autograded", "feedback") for p in (graded.course.root / folder).rglob("*")
             if p.is_file()]
    assert {p.parts[-3] for p in files if p.parts[-4] == "feedback"} == set(STUDENTS)
    secrets = {"the classmate's submission": EXCHANGE_SECRET.encode(), "the copy of tracks/": COPY_SECRET.encode()}
    leaked = {}
    for path in files:
        data = path.read_bytes()
        found = [what for what, secret in secrets.items() if secret in data]
        if found:
            leaked[str(path)] = found
    assert leaked == {}


def test_the_run_leaves_no_connection_process_or_changed_file(graded):
    """No connection reached the listener, no process carrying the marker outlived the run, and the grader's
    files, the exchange and the copy of the tracks are as they were."""
    assert graded.listener.connections == []
    assert graded.survivors == []
    assert graded.files_after == graded.files_before
