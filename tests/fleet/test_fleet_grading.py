"""The grading fleet for real: Celery workers on redis-server grade puzzles submissions with nbgrader, the
coordinator writes a PostgreSQL gradebook. Workers killed, Redis restarted, submissions that hang or crash."""
from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fleet_course as fc
import pytest
import redis as redis_client
from nbgrader.api import Gradebook

from gradebook.fleet_ledger import Ledger
from gradebook.summary import cell_scores, student_table
from workshop import submissions
from workshop.fleet import queue_view
from workshop.fleet.app import make_app, renew_s, sweep_s
from workshop.fleet.processes import kill_tree

CLASS = 4   # the class of the two-worker test: one of each kind of submission, more than the workers
# A cell that never ends and ignores interrupts. It sleeps rather than spins: to the grader the same hang (only
# the wall-clock limit stops it), without a core of the 2-core CI machine busy for the whole limit.
HANG = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(1)\n"


def _course(template: fc.Template, tmp_path: Path, n: int) -> tuple[Path, dict[str, float]]:
    """A copy of the template course (its gradebook is the test's) with ``n`` submissions; the total each must
    get."""
    course, release = template.copy(tmp_path / "course")
    expected = {}
    for student, answers, total in fc.class_of(n):
        fc.submit(course, release, student, answers)
        expected[student] = total
    return course, expected


def _grade(course: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "workshop.cli", "grade", "puzzles", "--course", str(course),
                             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"workshop grade did not finish in {timeout:g} s:\n{out}")
    assert proc.returncode == 0, out
    return out


def _ledger(url: str) -> list[dict]:
    ledger = Ledger(url)
    try:
        return ledger.rows("puzzles")
    finally:
        ledger.close()


def _totals(url: str) -> dict[str, float]:
    return student_table(cell_scores(url, "puzzles"))["total"].to_dict()


def _gradings(workers) -> list[str]:
    """Every grading the workers started, by student, from their logs."""
    return [m for w in workers for m in re.findall(r"\] grading (\S+?)/puzzles \(delivery", w.log_text())]


def _completed(workers) -> list[str]:
    """Every grading the workers finished, by student, from their logs."""
    return [m for w in workers for m in re.findall(r"\] graded (\S+?)/puzzles: ", w.log_text())]


def _submissions_in_gradebook(url: str) -> int:
    with Gradebook(url, "kernel-workshop") as gb:
        count = len(gb.assignment_submissions("puzzles"))
        gb.engine.dispose()
    return count


def _running(env: dict[str, str]) -> list[dict]:
    """The tasks running now, from the queue view."""
    found = queue_view.rows(env["WORKSHOP_GRADEBOOK_URL"], "puzzles", make_app(env["WORKSHOP_BROKER_URL"]))
    return [r for r in found if r["state"] == "running"]


def _wait_for(check, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        time.sleep(0.2)


def _wait_running(env: dict[str, str], exclude: str = "") -> dict:
    """A task a worker is running (not ``exclude``'s)."""
    found: list[dict] = []
    _wait_for(lambda: found.extend(r for r in _running(env) if r["student"] != exclude) or found, "a task to start")
    return found[0]


@pytest.mark.slow
def test_a_class_two_workers_into_postgres(tmp_path, fleet_env, workers, course_template):
    """`CLASS` submissions (each kind of `fleet_course.KINDS` once), two simulator workers, a PostgreSQL
    gradebook: each graded once, written once, and the totals those of a serial `nbgrader autograde` of the same
    files; nbgrader's export and formgrader read them."""
    url = fleet_env["WORKSHOP_GRADEBOOK_URL"]
    course, expected = _course(course_template, tmp_path, CLASS)
    serial_url = f"sqlite:///{tmp_path}/serial.db"
    serial = fc.make_course(tmp_path / "serial", {"WORKSHOP_GRADEBOOK_URL": serial_url})[0]
    shutil.copytree(course / "submitted", serial / "submitted")
    # nbgrader's own autograde of the same files, one after another in one process, runs meanwhile (it keeps
    # about one core busy; its course and gradebook are its own; its kernels have the workers' limit)
    serial_env = {**fc.nbg.nbgrader_env(), "WORKSHOP_GRADEBOOK_URL": serial_url,
                  "WORKSHOP_KERNEL_TIMEOUT": fleet_env["WORKSHOP_KERNEL_TIMEOUT"]}
    with open(tmp_path / "serial.log", "w") as log:
        serial_autograde = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", "puzzles"], cwd=serial,
                                            env=serial_env, stdout=log, stderr=subprocess.STDOUT)
    started = workers(2, fleet_env)
    out = _finish(_grade(course, fleet_env), timeout=600)

    rows = _ledger(url)
    assert sorted(r["student"] for r in rows) == sorted(expected), out
    assert {r["state"] for r in rows} == {"done"}, out
    assert all(r["deliveries"] == 1 for r in rows), out
    assert sorted(_gradings(started)) == sorted(expected)   # each graded exactly once
    assert {r["worker"] for r in rows} == {"w1@fleet-test", "w2@fleet-test"}
    assert _submissions_in_gradebook(url) == CLASS
    fleet_totals = _totals(url)
    assert fleet_totals == expected

    try:
        serial_autograde.wait(timeout=600)
    finally:
        if serial_autograde.poll() is None:   # past its time: stopped with its kernels and children
            kill_tree(serial_autograde.pid)
            serial_autograde.wait()
    assert serial_autograde.returncode == 0, (tmp_path / "serial.log").read_text()
    assert _totals(serial_url) == fleet_totals

    # nbgrader's own export reads the PostgreSQL gradebook; the autograded notebooks are in the course
    fc.nbgrader(course, {"WORKSHOP_GRADEBOOK_URL": url}, "export", "--to=grades.csv")
    with open(course / "grades.csv") as f:
        exported = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}
    assert exported == expected
    assert len(list((course / "autograded").glob("*/puzzles/puzzles.ipynb"))) == CLASS
    # and formgrader serves the same scores from either gradebook, PostgreSQL and SQLite (two servers at once)
    gradebooks = {url: course, serial_url: serial}
    with ThreadPoolExecutor(2) as pool:
        served = dict(zip(gradebooks, pool.map(lambda gb: fc.formgrader_submissions(
            gradebooks[gb], {"WORKSHOP_GRADEBOOK_URL": gb}), gradebooks)))
    for gradebook, submitted in served.items():
        assert {s: (sub["score"], sub["autograded"]) for s, sub in submitted.items()} == \
            {s: (total, True) for s, total in expected.items()}, gradebook

    again = _finish(_grade(course, fleet_env), timeout=60)   # nothing new: nothing sent, nothing written
    assert f"{CLASS} submission(s) already graded" in again
    assert len(_gradings(started)) == CLASS and len(_ledger(url)) == CLASS


@pytest.mark.slow
def test_lost_worker_is_noticed_within_the_visibility_timeout(tmp_path, fleet_env, workers, course_template,
                                                              monkeypatch):
    """SIGKILL the process grading a submission: its worker requeues it at once. SIGKILL a whole worker while it
    grades: its task goes to an idle worker once the dead worker's hold lapses (visibility timeout, then a
    renewal's and a sweep's period at most), not after the grading time limit. Each grading outlasts the
    visibility timeout: a live worker keeps its task (it renews its hold), so each is delivered exactly twice,
    and written once."""
    visibility = 8
    monkeypatch.setenv("WORKSHOP_VISIBILITY_TIMEOUT", str(visibility))   # for renew_s and sweep_s here
    env = {**fleet_env, "WORKSHOP_VISIBILITY_TIMEOUT": str(visibility)}
    url = env["WORKSHOP_GRADEBOOK_URL"]
    course, release = course_template.copy(tmp_path / "course")
    answers = submissions.reference_answers()
    slow = {**answers, "map": f"import time\ntime.sleep({2 * visibility})\n{answers['map']}"}
    for student in ("ada", "bob"):
        fc.submit(course, release, student, slow)
    started = workers(3, env)   # one stays idle for the lost tasks
    grading = _grade(course, env)

    first = _wait_running(env)
    kill_tree(int(first["worker"].split("pid ")[1]))   # the pool process running the task, and its nbgrader
    _wait_for(lambda: _gradings(started).count(first["student"]) == 2, "the killed task's redelivery")
    second = _wait_running(env, exclude=first["student"])
    victim = next(w for w in started if second["worker"].startswith(w.name))
    victim.kill()                                       # then a whole worker, while it grades
    lost_at = time.monotonic()
    _wait_for(lambda: _gradings(started).count(second["student"]) == 2, "the lost worker's task to come back")
    back_in = time.monotonic() - lost_at
    _finish(grading, timeout=300)

    # the dead worker's last renewal, the lapse, the next sweep; then a worker takes it at once
    assert back_in <= visibility + renew_s() + sweep_s() + 3, f"back in the queue after {back_in:.1f} s"
    print(f"\nthe lost worker's task was taken by another {back_in:.1f} s after the worker was killed "
          f"(visibility timeout {visibility} s)")
    rows = {r["student"]: r for r in _ledger(url)}
    assert {(s, r["state"], r["deliveries"]) for s, r in rows.items()} == {("ada", "done", 2), ("bob", "done", 2)}
    assert all(r["seconds"] > visibility for r in rows.values())
    # started twice (killed, then graded to the end), finished once: no live worker's task was handed out again
    assert sorted(_gradings(started)) == ["ada", "ada", "bob", "bob"]
    assert sorted(_completed(started)) == ["ada", "bob"]
    assert _submissions_in_gradebook(url) == 2
    assert _totals(url) == {"ada": 6.0, "bob": 6.0}
    assert not redis_client.Redis.from_url(env["WORKSHOP_BROKER_URL"]).hlen("unacked")   # nothing left held


@pytest.mark.slow
def test_redis_restart_mid_run_completes(tmp_path, fleet_env, workers, redis, course_template):
    """Redis (append-only) stops and comes back while workers grade: the run completes, each written once."""
    url = fleet_env["WORKSHOP_GRADEBOOK_URL"]
    course, expected = _course(course_template, tmp_path, 4)
    workers(2, fleet_env)
    grading = _grade(course, fleet_env)
    _wait_running(fleet_env)
    redis.restart(down_s=3)
    _finish(grading, timeout=400)

    rows = _ledger(url)
    assert sorted(r["student"] for r in rows) == sorted(expected)
    assert {r["state"] for r in rows} == {"done"}
    assert _submissions_in_gradebook(url) == 4
    assert _totals(url) == expected


def test_hanging_and_crashing_submissions_score_zero_once(tmp_path, fleet_env, workers, course_template):
    """A notebook that will not stop (it ignores interrupts) and one that is not a notebook: each is that
    student's 0 with the reason, graded once, and the student after them is graded as usual."""
    # the limit stops the hang; the reference's whole grading (nbgrader, its notebook, its hidden tests) must fit
    # in it on a loaded 2-core machine, where it took more than 15 s
    env = {**fleet_env, "WORKSHOP_GRADE_TIME_LIMIT": "30", "WORKSHOP_CELL_TIMEOUT": "600"}
    url = env["WORKSHOP_GRADEBOOK_URL"]
    course, release = course_template.copy(tmp_path / "course")
    fc.submit(course, release, "hang", {**submissions.reference_answers(), "map": HANG})
    broken = course / "submitted" / "crash" / "puzzles"
    broken.mkdir(parents=True)
    (broken / "puzzles.ipynb").write_text("{not a notebook")
    fc.submit(course, release, "reference", submissions.reference_answers())
    started = workers(1, env)
    _finish(_grade(course, env), timeout=300)

    rows = {r["student"]: r for r in _ledger(url)}
    assert rows["hang"]["state"] == "failed" and "ran past its 30 s limit" in rows["hang"]["reason"]
    assert rows["crash"]["state"] == "failed" and "NotJSONError" in rows["crash"]["reason"]
    assert rows["reference"]["state"] == "done" and rows["reference"]["score"] == 6, rows["reference"]
    assert all(r["deliveries"] == 1 for r in rows.values())
    assert sorted(_gradings(started)) == ["crash", "hang", "reference"]   # no retries
    fc.nbgrader(course, {"WORKSHOP_GRADEBOOK_URL": url}, "export", "--to=grades.csv")
    with open(course / "grades.csv") as f:
        exported = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}
    assert exported == {"hang": 0.0, "crash": 0.0, "reference": 6.0}


def test_local_mode_grades_here_into_sqlite(tmp_path, course_template, template_cache):
    """Without WORKSHOP_BROKER_URL, `workshop grade` grades on this machine, one submission after another, into
    the course's default SQLite gradebook (gradebook.db beside nbgrader_config.py): no broker, no worker."""
    env = {k: v for k, v in fc.nbg.nbgrader_env().items() if k not in ("WORKSHOP_BROKER_URL", "WORKSHOP_GRADEBOOK_URL")}
    env["WORKSHOP_WORKER_CACHE"] = str(template_cache)   # the generated assignment the workers' tests made
    course, release = course_template.copy(tmp_path / "course")
    fc.nbgrader(course, env, "generate_assignment", "puzzles", "--force")   # into course/gradebook.db
    expected = {}
    for student, answers, total in fc.class_of(3)[::2]:   # a reference and a wrong zip
        fc.submit(course, release, student, answers)
        expected[student] = total
    out = _finish(_grade(course, env), timeout=300)
    assert "grading here, one submission at a time (local mode)" in out
    url = f"sqlite:///{course / 'gradebook.db'}"
    assert _totals(url) == expected
    assert {(r["student"], r["state"], r["worker"]) for r in _ledger(url)} == {(s, "done", "local") for s in expected}
    # the generated assignments kept between tasks: a gradebook, no source notebook (no solutions)
    assert list(template_cache.rglob("gradebook.db")) and not list(template_cache.rglob("*.ipynb"))


def test_ledger_writes_a_result_once(tmp_path):
    """The claim on a task's result is taken once: a result seen twice is written once."""
    url = f"sqlite:///{tmp_path}/gradebook.db"
    ledger = Ledger(url)
    ledger.queued("puzzles", "ada", "c0ffee", "task-1", "sim")
    assert ledger.claim("task-1") and not ledger.claim("task-1")
    ledger.finish("task-1", "done", score=6.0, max_score=6.0)
    ledger.queued("puzzles", "ada", "c0ffee", "task-2", "sim")   # sent again (--force): one row, a new task
    assert [r["task_id"] for r in ledger.rows("puzzles")] == ["task-2"]
    assert ledger.claim("task-2") and not ledger.claim("task-1")
    ledger.close()


def test_a_task_sent_while_redis_restarts_waits_for_it(redis):
    """The coordinator sends its tasks while workers already grade: a Redis restart then (down 3 s) delays a send
    instead of failing the run (kombu's own retry was 0.6 s)."""
    app = make_app(redis.url)
    app.send_task("workshop.grade_submission", args=("vecadd", "ada", {}, {}), queue="publish-test",
                  ignore_result=True)
    redis.stop()   # the connection the first send made is now broken
    back = threading.Timer(3.0, redis.start)
    back.start()
    try:
        start = time.monotonic()
        app.send_task("workshop.grade_submission", args=("vecadd", "bob", {}, {}), queue="publish-test",
                      ignore_result=True)
        waited = time.monotonic() - start
    finally:
        back.join()
    assert waited >= 2.5, waited
    assert redis_client.Redis.from_url(redis.url).llen("publish-test") == 2   # append-only: the first is kept
