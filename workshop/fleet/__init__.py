"""The grading fleet: Celery workers on a Redis broker grade submissions, the coordinator writes the gradebook.

- `workshop.fleet.app`: the Celery application and its delivery settings (``WORKSHOP_BROKER_URL``);
- `workshop.fleet.isolated`: one submission through the trusted path (real ``nbgrader autograde``) in a
  temporary course directory that holds only that submission, the source notebook and the course config;
- `workshop.fleet.tasks`: the task a worker runs;
- `workshop.fleet.worker`: ``workshop worker``, one Celery worker per GPU (or a simulator worker);
- `workshop.fleet.lease`: a worker renews its hold on the tasks it holds, so a lost worker's task is handed
  to another within a visibility timeout;
- `workshop.fleet.coordinator`: ``workshop grade``, which enqueues, follows and alone writes the gradebook;
- `workshop.fleet.queue_view`: ``workshop queue``, what the TA sees of the queue.
"""
