"""The fleet in containers (opt-in: ``WORKSHOP_DOCKER_TESTS=1``, images built with ``bash docker/build.sh``):
docker/compose.yaml's redis, postgres, coordinator and two simulator workers, all on the host's network bound
to 127.0.0.1, grade cut-down puzzles submissions into the containers' PostgreSQL; nbgrader's export in the
coordinator container gives each student the expected total. ``WORKSHOP_DOCKER_SUBMISSIONS`` sets how many
(default 8). GPU workers cannot run on a machine without a GPU: their services are only validated."""
from __future__ import annotations

import csv
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import fleet_course as fc
import pytest

from gradebook.fleet_ledger import Ledger
from workshop.fleet.local import free_port

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

    def wait_log(self, service: str, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self("logs", "--no-color", service).stdout:
            if time.monotonic() > deadline:
                pytest.fail(f"{service} did not log {text!r} in {timeout:g} s:\n{self('logs', service).stdout}")
            time.sleep(1)


def test_fleet_in_containers(tmp_path, record_property):
    n = int(os.environ.get("WORKSHOP_DOCKER_SUBMISSIONS", "8"))
    password = secrets.token_hex(12)
    redis_port, pg_port = free_port(), free_port()
    course_dir = tmp_path / "course"
    project = f"kwfleet{os.getpid()}"
    compose = Compose(project, {"POSTGRES_PASSWORD": password, "REDIS_PORT": str(redis_port),
                                "POSTGRES_PORT": str(pg_port), "COURSE": str(course_dir), "WORKER_HOST": project})
    networks_before = subprocess.run(["docker", "network", "ls", "-q"], capture_output=True, text=True).stdout
    times: dict[str, float] = {}
    try:
        start = time.monotonic()
        compose("up", "-d", "redis", "postgres", timeout=180)   # waits for neither: the course needs postgres
        url = f"postgresql+psycopg://workshop:{password}@127.0.0.1:{pg_port}/gradebook"
        _wait_for_postgres(url)
        course, release = fc.make_course(course_dir, {"WORKSHOP_GRADEBOOK_URL": url})
        expected = {}
        for student, answers, total in fc.class_of(n):
            fc.submit(course, release, student, answers)
            expected[student] = total
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{IMAGE_UID}:{IMAGE_UID}", str(course_dir)], check=True)
        compose("up", "-d", "coordinator", "sim-worker-1", "sim-worker-2", timeout=180)
        for worker in ("sim-worker-1", "sim-worker-2"):
            compose.wait_log(worker, " ready.")
        times["up"] = time.monotonic() - start
        assert subprocess.run(["docker", "network", "ls", "-q"], capture_output=True,
                              text=True).stdout == networks_before, "compose made a network"

        start = time.monotonic()
        graded = compose("exec", "-T", "coordinator", "workshop", "grade", "puzzles", "--course", str(course))
        times["grade"] = time.monotonic() - start
        compose("exec", "-T", "coordinator", "nbgrader", "export", "--to=grades.csv")
        with open(course / "grades.csv") as f:
            exported = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}
        assert exported == expected, graded.stdout

        ledger = Ledger(url)
        rows = ledger.rows("puzzles")
        ledger.close()
        assert {r["state"] for r in rows} == {"done"} and all(r["deliveries"] == 1 for r in rows)
        assert {r["worker"] for r in rows} == {f"sim1@{project}", f"sim2@{project}"}
        inside = compose("exec", "-T", "sim-worker-1", "sh", "-c",
                         "id -un; find /opt/kernel-workshop \"$WORKSHOP_WORKER_CACHE\" -name '*.ipynb' | wc -l; "
                         "find /opt/kernel-workshop -name gradebook.db | wc -l").stdout
        # a worker: unprivileged, no notebook in its image or in what it keeps between tasks, no gradebook
        assert inside.split() == ["workshop", "0", "0"]
        seconds = sorted(r["seconds"] for r in rows)
        print(f"\n{n} submissions: containers up {times['up']:.1f} s, workshop grade {times['grade']:.1f} s "
              f"({n / times['grade'] * 60:.2f}/min); grading per submission {seconds[0]:.1f}-{seconds[-1]:.1f} s, "
              f"median {seconds[len(seconds) // 2]:.1f} s")
        record_property("times", times)
    finally:
        (tmp_path / "compose.log").write_text(compose("logs", "--no-color", check=False).stdout)
        compose("down", "-v", "--remove-orphans", check=False, timeout=300)


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
