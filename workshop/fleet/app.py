"""The Celery application of the grading fleet, configured from the environment.

- ``WORKSHOP_BROKER_URL``: the Redis broker (``redis://127.0.0.1:6379/0``); unset means local mode: ``workshop
  grade`` grades on this machine, one submission after another, without Celery;
- ``WORKSHOP_RESULT_URL``: where results are kept (default: the broker);
- ``WORKSHOP_GRADE_TIME_LIMIT``: seconds one submission may take to grade (default 1800); past it the grading
  is stopped and the submission scores 0;
- ``WORKSHOP_VISIBILITY_TIMEOUT``: seconds after which a task taken by a worker that vanished is handed to
  another (default: the time limit plus 120 s; it must exceed the longest grading, or a task still running is
  handed out twice).

Delivery: a task is acknowledged only once it has finished (``acks_late``), and requeued when the process
running it dies (``reject_on_worker_lost``); each worker takes one task at a time (prefetch 1).
"""
from __future__ import annotations

import os

from celery import Celery

SIM_QUEUE = "sim"


def broker_url() -> str | None:
    return os.environ.get("WORKSHOP_BROKER_URL") or None


def grade_time_limit_s() -> float:
    return float(os.environ.get("WORKSHOP_GRADE_TIME_LIMIT", "1800"))


def visibility_timeout_s() -> float:
    return float(os.environ.get("WORKSHOP_VISIBILITY_TIMEOUT", grade_time_limit_s() + 120))


def make_app(broker: str | None = None) -> Celery:
    broker = broker or broker_url() or "redis://127.0.0.1:6379/0"
    app = Celery("workshop", broker=broker, backend=os.environ.get("WORKSHOP_RESULT_URL") or broker,
                 include=["workshop.fleet.tasks"])
    limit = grade_time_limit_s()
    visibility = {"visibility_timeout": visibility_timeout_s()}
    # Look for tasks of vanished workers every 5 s (kombu's default sweep is every 100 s).
    transport = {**visibility, "unacked_restore_interval": 5, "unacked_restore_throttle": 1}
    app.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_track_started=True,          # the queue view shows which worker runs a task
        worker_prefetch_multiplier=1,
        task_soft_time_limit=limit + 30,  # the grading stops itself at `limit`; these are the backstops
        task_time_limit=limit + 60,
        task_default_queue=SIM_QUEUE,
        broker_transport_options=transport,
        result_backend_transport_options=visibility,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        result_expires=14 * 24 * 3600,
        result_extended=True,
        worker_hijack_root_logger=False,
    )
    return app


app = make_app()
