"""Fixtures of the fleet tests: a real redis-server (append-only) per test, one PostgreSQL cluster with a
database per test (each a copy of one into which the course's assignment was generated once), and `workshop
worker` processes, all on 127.0.0.1, stopped at the end."""
from __future__ import annotations

import os
import re
from pathlib import Path

import fleet_course as fc
import pytest

from workshop.fleet import local

MISSING = local.missing()
if MISSING:
    pytest.skip(f"the fleet tests need {', '.join(MISSING)} (apt-get install redis-server postgresql)",
                allow_module_level=True)


@pytest.fixture(scope="session")
def postgres():
    server = local.Postgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def course_template(postgres, tmp_path_factory) -> fc.Template:
    """The cut puzzles course, generated once into a database that each test's gradebook copies."""
    course, release = fc.make_course(tmp_path_factory.mktemp("template") / "course",
                                     {"WORKSHOP_GRADEBOOK_URL": postgres.database("course_template")})
    return fc.Template(course, release, "course_template")


@pytest.fixture
def gradebook_url(postgres, request, course_template) -> str:
    """A gradebook of this test's own, with the cut puzzles assignment already generated into it."""
    return postgres.database(re.sub(r"\W", "_", request.node.name.lower())[:60], template=course_template.database)


@pytest.fixture
def redis(tmp_path):
    server = local.Redis(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def template_cache(tmp_path_factory) -> Path:
    """Workers' generated-assignment templates, shared by the tests (same source, same template)."""
    return tmp_path_factory.mktemp("worker-cache")


@pytest.fixture
def fleet_env(redis, gradebook_url, template_cache) -> dict[str, str]:
    """The environment of the coordinator and the workers (the workers drop the gradebook URL). A grading child
    gets the real per-kernel limit, not the 5 s of the hang tests (tests/conftest.py): no kernel here hangs, and
    two workers grading at once on a small machine can take longer than that over map's hidden cases."""
    return {**os.environ, "WORKSHOP_BROKER_URL": redis.url, "WORKSHOP_GRADEBOOK_URL": gradebook_url,
            "WORKSHOP_WORKER_CACHE": str(template_cache), "WORKSHOP_GRADE_TIME_LIMIT": "180",
            "WORKSHOP_KERNEL_TIMEOUT": "30"}


@pytest.fixture
def workers(tmp_path):
    """Start workers with ``start(n, env)``; every one still running is stopped at the end."""
    started: list[local.Worker] = []

    def start(n: int, env: dict[str, str]) -> list[local.Worker]:
        new = [local.Worker(f"w{len(started) + i + 1}@fleet-test", tmp_path / f"w{len(started) + i + 1}.log", env)
               for i in range(n)]
        started.extend(w.start() for w in new)
        return [w.wait_ready() for w in new]

    yield start
    for worker in started:
        worker.kill()
