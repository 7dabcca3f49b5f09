"""The fleet in containers (opt-in: ``WORKSHOP_DOCKER_TESTS=1``, images built with ``bash docker/build.sh``):
docker/compose.yaml's redis, postgres, coordinator and two simulator workers, all on the host's network bound
to 127.0.0.1, grade cut-down puzzles submissions into the containers' PostgreSQL; nbgrader's export in the
coordinator container gives each student the expected total. ``WORKSHOP_DOCKER_SUBMISSIONS`` sets how many
(default 8). Then a worker container is killed while it grades: it comes back, and its task is graded once by
a live worker within a minute or so. The services come up once for both tests. GPU workers cannot run on a
machine without a GPU."""
from __future__ import annotations

import csv
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import fleet_course as fc
import pytest
import redis

from gradebook.fleet_ledger import Ledger
from workshop import submissions
from workshop.fleet import queue_view
from workshop.fleet.app import make_app, renew_s, sweep_s, visibility_timeout_s
from workshop.fleet.local import free_port
from workshop.fleet.tasks import deliveries_key

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker" / "compose.yaml"
IMAGES = ("kernel-workshop/services", "kernel-workshop/worker", "kernel-workshop/coordinator")
IMAGE_UID = 1000   # the images' user (docker/build.sh's UID_IN_IMAGES)


def _why_not() -> str:
    if os.environ.get("WORKSHOP_DOCKER_TESTS") != "1":
        return "set WORKSHOP_DOCKER_TESTS=1 to run the fleet in containers"
    if not (shutil.which("docker") and shutil.which("docker-compose")):
        return "needs docker and docker-compose (apt-get install docker.io docker-compose)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "dockerd is not running"
    absent = [i for i in IMAGES if subprocess.run(["docker", "image", "inspect", i], capture_output=True).returncode]
    return f"images {', '.join(absent)} not built (bash docker/build.sh)" if absent else ""


pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "runs")]


class Compose:
    """docker-compose on docker/compose.yaml under a project name of its own, with the given variables."""

    def __init__(self, project: str, env: dict[str, str]):
        self.base = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", project, "--profile", "sim"]
        self.env = {**os.environ, **env}

    def __call__(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([*self.base, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, f"docker-compose {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*self.base, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    def wait_log(self, service: str, text: str, timeout: float = 120, count: int = 1) -> None:
        """Wait until ``service``'s log holds ``text`` ``count`` times."""
        deadline = time.monotonic() + timeout
        while self("logs", "--no-color", service).stdout.count(text) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"{service} did not log {text!r} in {timeout:g} s:\n{self('logs', service).stdout}")
            time.sleep(1)


@dataclass
class Fleet:
    """The services up, and the course (made on the host, generated into the containers' PostgreSQL)."""
    compose: Compose
    project: str
    course: Path
    release: object
    url: str
    redis_url: str
    up_s: float

    def submit(self, students: list[tuple[str, dict[str, str], float]]) -> dict[str, float]:
        """Hand in these submissions (readable and writable by the images' user); their expected totals."""
        for student, answers, _ in students:
            fc.submit(self.course, self.release, student, answers)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{IMAGE_UID}:{IMAGE_UID}", str(self.course)], check=True)
        return {student: total for student, _, total in students}

    def grade(self) -> subprocess.Popen:
        return self.compose.popen("exec", "-T", "coordinator", "workshop", "grade", "puzzles", "--course",
                                  str(self.course))

    def exported(self) -> dict[str, float]:
        self.compose("exec", "-T", "coordinator", "nbgrader", "export", "--to=grades.csv")
        with open(self.course / "grades.csv") as f:
            return {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}

    def ledger(self) -> dict[str, dict]:
        ledger = Ledger(self.url)
        try:
            return {r["student"]: r for r in ledger.rows("puzzles")}
        finally:
            ledger.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """docker/compose.yaml's redis, postgres, coordinator and two simulator workers, under a project name of its
    own on free ports; its logs are kept in the test's folder, and everything is removed at the end."""
    tmp_path = tmp_path_factory.mktemp("docker-fleet")
    password = secrets.token_hex(12)
    redis_port, pg_port = free_port(), free_port()
    course_dir = tmp_path / "course"
    project = f"kwfleet{os.getpid()}"
    compose = Compose(project, {"POSTGRES_PASSWORD": password, "REDIS_PORT": str(redis_port),
                                "POSTGRES_PORT": str(pg_port), "COURSE": str(course_dir), "WORKER_HOST": project})
    networks_before = subprocess.run(["docker", "network", "ls", "-q"], capture_output=True, text=True).stdout
    try:
        start = time.monotonic()
        compose("up", "-d", "redis", "postgres", timeout=180)   # waits for neither: the course needs postgres
        url = f"postgresql+psycopg://workshop:{password}@127.0.0.1:{pg_port}/gradebook"
        _wait_for_postgres(url)
        course, release = fc.make_course(course_dir, {"WORKSHOP_GRADEBOOK_URL": url})
        compose("up", "-d", "coordinator", "sim-worker-1", "sim-worker-2", timeout=180)
        for worker in ("sim-worker-1", "sim-worker-2"):
            compose.wait_log(worker, " ready.")
        up_s = time.monotonic() - start
        assert subprocess.run(["docker", "network", "ls", "-q"], capture_output=True,
                              text=True).stdout == networks_before, "compose made a network"
        yield Fleet(compose, project, course, release, url, f"redis://127.0.0.1:{redis_port}/0", up_s)
    finally:
        (tmp_path / "compose.log").write_text(compose("logs", "--no-color", check=False).stdout)
        compose("down", "-v", "--remove-orphans", check=False, timeout=300)


def test_fleet_in_containers(fleet, record_property):
    n = int(os.environ.get("WORKSHOP_DOCKER_SUBMISSIONS", "8"))
    expected = fleet.submit(fc.class_of(n))
    start = time.monotonic()
    graded = fleet.grade()
    out, _ = graded.communicate(timeout=600)
    grade_s = time.monotonic() - start
    assert graded.returncode == 0, out
    assert fleet.exported() == expected, out

    rows = fleet.ledger().values()
    assert {r["state"] for r in rows} == {"done"} and all(r["deliveries"] == 1 for r in rows)
    assert {r["worker"] for r in rows} == {f"sim1@{fleet.project}", f"sim2@{fleet.project}"}
    inside = fleet.compose("exec", "-T", "sim-worker-1", "sh", "-c",
                           "id -un; find /opt/kernel-workshop \"$WORKSHOP_WORKER_CACHE\" -name '*.ipynb' | wc -l; "
                           "find /opt/kernel-workshop -name gradebook.db | wc -l").stdout
    # a worker: unprivileged, no notebook in its image or in what it keeps between tasks, no gradebook
    assert inside.split() == ["workshop", "0", "0"]
    seconds = sorted(r["seconds"] for r in rows)
    print(f"\n{n} submissions: containers up {fleet.up_s:.1f} s, workshop grade {grade_s:.1f} s "
          f"({n / grade_s * 60:.2f}/min); grading per submission {seconds[0]:.1f}-{seconds[-1]:.1f} s, "
          f"median {seconds[len(seconds) // 2]:.1f} s")
    record_property("times", {"up": fleet.up_s, "grade": grade_s})


def test_killed_worker_container_comes_back_and_its_task_is_graded_once(fleet, monkeypatch):
    """The stock compose file's settings: a worker container killed while it grades (its init process
    SIGKILLed from the host, as a crash or the OOM killer would) is restarted by its restart policy, and its
    task is graded again by a live worker once the dead worker's hold on it lapses: written once, and
    ``workshop grade`` ends within 90 s of the kill."""
    monkeypatch.delenv("WORKSHOP_VISIBILITY_TIMEOUT", raising=False)   # the containers' default, here too
    expected = fleet.submit([("lost-ref", submissions.reference_answers(), 6.0),
                             ("kept-zip", submissions.wrong_answers("zip_subtracts"), 3.0)])
    app = make_app(fleet.redis_url)
    graded = fleet.grade()
    running: list[dict] = []
    deadline = time.monotonic() + 180
    while not running:
        assert time.monotonic() < deadline and graded.poll() is None, "no task started"
        found = queue_view.rows(fleet.url, "puzzles", app)
        running = [r for r in found if r["state"] == "running" and r["student"] in expected]
        time.sleep(0.2)
    lost, worker = running[0]["student"], running[0]["worker"].split("@")[0]   # sim1 or sim2
    service = f"sim-worker-{worker.removeprefix('sim')}"
    container = fleet.compose("ps", "-q", service).stdout.strip()
    starts = redis.Redis.from_url(fleet.redis_url)
    killed_at = time.monotonic()
    os.kill(int(_inspect(container, "{{.State.Pid}}")), signal.SIGKILL)
    taken_again = None
    while graded.poll() is None and time.monotonic() - killed_at < 300:
        if taken_again is None and int(starts.get(deliveries_key(running[0]["task_id"])) or 0) == 2:
            taken_again = time.monotonic() - killed_at
        time.sleep(0.2)
    out, _ = graded.communicate(timeout=10)
    waited = time.monotonic() - killed_at
    assert graded.returncode == 0, out

    rows = fleet.ledger()
    assert {s: (rows[s]["state"], rows[s]["deliveries"]) for s in expected} == \
        {lost: ("done", 2), **{s: ("done", 1) for s in expected if s != lost}}
    exported = fleet.exported()
    assert {s: exported[s] for s in expected} == expected
    logs = fleet.compose("logs", "--no-color", "sim-worker-1", "sim-worker-2").stdout
    assert logs.count(f"] grading {lost}/puzzles (delivery ") == 2
    assert logs.count(f"] graded {lost}/puzzles: ") == 1   # the killed grading never finished
    assert _inspect(container, "{{.State.Running}} {{.RestartCount}}") == "true 1"
    fleet.compose.wait_log(service, f"{worker}@{fleet.project} ready.", count=2)   # back, serving again
    print(f"\nworker container {service} killed mid-task: {lost} taken again {taken_again:.1f} s later, "
          f"`workshop grade` done {waited:.1f} s later")
    # the dead worker's last renewal, the lapse, a sweep; then a free or restarted worker takes it
    assert taken_again <= visibility_timeout_s() + renew_s() + sweep_s() + 5
    assert waited <= 90


def _inspect(container: str, fmt: str) -> str:
    return subprocess.run(["docker", "inspect", "-f", fmt, container], capture_output=True, text=True,
                          check=True).stdout.strip()


def _wait_for_postgres(url: str, timeout: float = 90) -> None:
    import sqlalchemy
    deadline = time.monotonic() + timeout
    while True:
        try:
            engine = sqlalchemy.create_engine(url)
            with engine.connect():
                engine.dispose()
                return
        except sqlalchemy.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
