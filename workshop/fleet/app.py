"""The Celery application of the grading fleet, configured from the environment.

- ``WORKSHOP_BROKER_URL``: the Redis broker (``redis://127.0.0.1:6379/0``); unset means local mode: ``workshop
  grade`` grades on this machine, one submission after another, without Celery;
- ``WORKSHOP_RESULT_URL``: where results are kept (default: the broker);
- ``WORKSHOP_GRADE_TIME_LIMIT``: seconds one submission may take to grade (default 1800); past it the grading
  is stopped and the submission scores 0;
- ``WORKSHOP_VISIBILITY_TIMEOUT``: seconds a worker may go without renewing its hold on a task before the
  task is handed to another (default 30). A live worker renews every task it holds every sixth of that,
  however long the grading takes (`workshop.fleet.lease`), so only a lost worker's task goes back to the queue.

Delivery: a task is acknowledged only once it has finished (``acks_late``), and requeued when the process
running it dies (``reject_on_worker_lost``); each worker takes one task at a time (prefetch 1). Every worker
sweeps the tasks taken but not acknowledged every `sweep_s` and puts each one whose hold was not renewed for
the visibility timeout back at the front of its queue: a lost worker's task is graded again 25 to 35 s after
the worker was lost (with the default), by the next free worker.
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
    return float(os.environ.get("WORKSHOP_VISIBILITY_TIMEOUT", "30"))


def renew_s() -> float:
    """How often a worker renews its hold on the tasks it holds."""
    return visibility_timeout_s() / 6


def sweep_s() -> float:
    """How often each worker looks for tasks whose hold lapsed (kombu's default is every 100 s)."""
    return min(5.0, renew_s())


PUBLISH_RETRY_POLICY = {"max_retries": 60, "interval_start": 0, "interval_step": 1, "interval_max": 2}


def make_app(broker: str | None = None) -> Celery:
    broker = broker or broker_url() or "redis://127.0.0.1:6379/0"
    app = Celery("workshop", broker=broker, backend=os.environ.get("WORKSHOP_RESULT_URL") or broker,
                 include=["workshop.fleet.tasks"])
    limit = grade_time_limit_s()
    visibility = {"visibility_timeout": visibility_timeout_s()}
    # A sweeper killed while it sweeps holds the sweep's lock until the lock expires (kombu's default: 300 s).
    transport = {**visibility, "unacked_restore_interval": sweep_s(), "unacked_restore_throttle": 1,
                 "unacked_mutex_expire": 2 * sweep_s()}
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
        # a task sent while Redis restarts waits for it (about two minutes), not kombu's default 0.6 s
        task_publish_retry_policy=PUBLISH_RETRY_POLICY,
        result_expires=14 * 24 * 3600,
        result_extended=True,
        worker_hijack_root_logger=False,
    )
    return app


app = make_app()
