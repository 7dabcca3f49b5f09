"""The fleet's one task: grade a submission on this worker and hand the result back to the coordinator.

A submission's failure (it hangs, crashes, does not parse) is a result with status "failed": never retried.
A worker's fault (`InfrastructureFault`: no sandbox, no GPU) is retried, a few times, with a pause. A task
whose worker process died is redelivered (``reject_on_worker_lost``), at most ``MAX_DELIVERIES`` times: a
submission that keeps killing its worker is failed, not a retry storm.
"""
from __future__ import annotations

import logging
import os
import socket

from workshop.fleet import isolated
from workshop.fleet.app import app, grade_time_limit_s

MAX_DELIVERIES = 3
log = logging.getLogger(__name__)


def deliveries_key(task_id: str) -> str:
    """The result store's count of how many times this task has started (it survives a lost worker)."""
    return f"workshop:deliveries:{task_id}"


def _deliveries(task_id: str) -> int:
    """Count one more start of this task; how many there have been."""
    key = deliveries_key(task_id)
    client = app.backend.client
    count = int(client.incr(key))
    client.expire(key, 14 * 24 * 3600)
    return count


@app.task(bind=True, name="workshop.grade_submission", autoretry_for=(isolated.InfrastructureFault,),
          max_retries=3, retry_backoff=10, retry_jitter=False, resultrepr_maxsize=160)
def grade_submission(self, assignment: str, student: str, sources: dict[str, str],
                     submitted: dict[str, str]) -> dict:
    deliveries = _deliveries(self.request.id)
    worker = {"worker": self.request.hostname or socket.gethostname(), "pid": os.getpid(),
              "deliveries": deliveries, "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    log.info("grading %s/%s (delivery %d)", student, assignment, deliveries)
    if deliveries > MAX_DELIVERIES:
        return {**worker, "status": "failed", "log": "",
                "reason": f"the worker grading it was lost {deliveries - 1} times: not retried again"}
    result = isolated.grade(assignment, student, sources, submitted, grade_time_limit_s())
    log.info("graded %s/%s: %s in %s s", student, assignment, result["status"], result["seconds"])
    return {**worker, **result}
