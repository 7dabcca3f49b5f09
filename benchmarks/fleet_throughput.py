"""Fleet throughput on the simulator: submissions per minute with 1 and 2 Celery workers, and the per-task
overhead (queue to result, excluding grading).

    python -m benchmarks.fleet_throughput [--submissions N] [--workers 1 2]     # from the repository root

Starts redis-server and PostgreSQL on 127.0.0.1 (`workshop.fleet.local`), makes a course with the whole
puzzles assignment and N submissions (reference and stub alternating), then for each worker count runs
`workshop grade` (in this process, the coordinator) against that many `workshop worker --sim` processes.
Each worker's generated-assignment template is built before the clock starts. Overhead per task = wall time
with one worker / N - the mean seconds a worker spent grading (copying its course and running nbgrader
autograde): dispatch, result transfer and the gradebook write. Prints a Markdown table and writes
benchmarks/results/fleet-throughput-<date>.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    from graders.settings import RESULTS, ROOT
    from workshop import submissions
    from workshop.course import nbgrader_env
    from workshop.fleet import local

    scratch = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    redis, postgres = local.Redis(scratch / "redis").start(), local.Postgres().start()
    os.environ.update({"WORKSHOP_BROKER_URL": redis.url, "WORKSHOP_WORKER_CACHE": str(scratch / "cache"),
                       "NUMBA_ENABLE_CUDASIM": "1", "PATH": nbgrader_env()["PATH"]})
    runs = []
    try:
        for n_workers in args.workers:
            os.environ["WORKSHOP_GRADEBOOK_URL"] = postgres.database(f"bench_{n_workers}")
            course = _course(scratch / f"course-{n_workers}", args.submissions, submissions)
            _warm_templates(course)
            workers = [local.Worker(f"bench{i}@{platform.node()}", scratch / f"w{n_workers}-{i}.log",
                                    dict(os.environ)).start() for i in range(n_workers)]
            try:
                for w in workers:
                    w.wait_ready()
                runs.append(_run(course, n_workers, args.submissions))
            finally:
                for w in workers:
                    w.stop()
            redis_cli = ["redis-cli", "-p", str(redis.port), "flushall"]
            subprocess.run(redis_cli, check=True, capture_output=True)
    finally:
        redis.stop()
        postgres.stop()

    record = {
        "what": "workshop grade puzzles on the simulator: submissions per minute by number of workers",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version(),
        "versions": {d: metadata.version(d) for d in ("celery", "kombu", "redis", "nbgrader", "numba-cuda")},
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "runs": runs,
    }
    out = RESULTS / f"fleet-throughput-{datetime.date.today():%Y%m%d}.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print("| workers | submissions | wall s | per minute | mean grading s | overhead s/task |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['workers']} | {r['submissions']} | {r['wall_s']} | {r['per_minute']} | {r['mean_grading_s']} "
              f"| {r['overhead_s_per_task']} |")
    print(f"wrote {out}")


def _course(dest: Path, n: int, submissions) -> Path:
    from workshop import course as nbg
    course = nbg.make_course(dest, ["puzzles"])
    release = nbg.release(course, "puzzles")
    for i in range(n):
        answers = submissions.reference_answers() if i % 2 == 0 else {}
        submissions.write(course, f"student{i:02d}", "puzzles", submissions.fill(release, answers))
    return course


def _warm_templates(course: Path) -> None:
    """Build the workers' template (nbgrader generate_assignment) before timing: it is once per source."""
    from workshop.fleet import coordinator, isolated
    isolated._template("puzzles", coordinator.source_notebooks(course, "puzzles"))


def _run(course: Path, n_workers: int, n: int) -> dict:
    from gradebook.fleet_ledger import Ledger
    from workshop.fleet import coordinator
    start = time.monotonic()
    rc = coordinator.grade(course, "puzzles")
    wall = time.monotonic() - start
    config = coordinator.course_config(course)
    ledger = Ledger(coordinator.gradebook_url(course, config))
    rows = ledger.rows("puzzles")
    ledger.close()
    if rc != 0 or len(rows) != n or {r["state"] for r in rows} != {"done"}:
        sys.exit(f"the run with {n_workers} worker(s) did not grade all {n}: {rows}")
    grading = statistics.mean(r["seconds"] for r in rows)
    return {"workers": n_workers, "submissions": n, "wall_s": round(wall, 1),
            "per_minute": round(60 * n / wall, 2), "mean_grading_s": round(grading, 2),
            "overhead_s_per_task": round(wall / n - grading, 2) if n_workers == 1 else None}


def _cpu() -> str:
    return next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor())


if __name__ == "__main__":
    main()
