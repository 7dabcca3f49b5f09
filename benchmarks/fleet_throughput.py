"""Fleet throughput: submissions per minute with 1 and 2 Celery workers, and the per-task overhead (queue to
result, excluding grading).

    python -m benchmarks.fleet_throughput [--submissions N] [--workers 1 2]     # puzzles on the simulator
    python -m benchmarks.fleet_throughput --track gemm --gpu --workers 1 --gradebook sqlite   # on a GPU worker
    python -m benchmarks.fleet_throughput --track gemm --gpu --workers 1 4 --submissions 8 24 --class-size 200

Run from the repository root. Starts redis-server (and, for ``--gradebook postgres``, PostgreSQL) on 127.0.0.1
(`workshop.fleet.local`), makes a course with the whole assignment of ``--track`` and N submissions (a CUDA track: the reference, each
group of known-wrong solutions and the stub in turn; puzzles: reference and stub alternating), then for each
worker count (with its own N when ``--submissions`` names one per count) runs `workshop grade` (in this process, the coordinator)
against that many `workshop worker --sim` processes, or with ``--gpu`` `workshop worker --gpu I`, one per GPU.
Each worker's generated-assignment template is built before the clock starts. Overhead per task = wall time
with one worker / N - the mean seconds a worker spent grading (copying its course and running nbgrader
autograde): dispatch, result transfer and the gradebook write. Scaling = a run's submissions per minute over
(its workers x the one-worker run's). ``--class-size C``: the time C submissions of the same mix would take on the
largest run's workers, projected from its rate, and on ``--project-gpus`` GPUs from the one-worker rate; both are
labelled projections. Every run stops unless each submission has its one ledger row, done; the record keeps the
most deliveries any of them took. Prints a Markdown table and writes
benchmarks/results/platform/fleet-throughput-<track>-<date>.json (a record of the fleet, whichever
track it grades).
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
    parser.add_argument("--submissions", type=int, nargs="+", default=[8],
                        help="submissions per run: one number, or one per worker count")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--class-size", type=int, help="project the time this many submissions take")
    parser.add_argument("--project-gpus", type=int, default=4, help="workers of the one-worker projection")
    parser.add_argument("--track", default="puzzles", help="the assignment graded (default: puzzles)")
    parser.add_argument("--gpu", action="store_true", help="GPU workers, one per GPU 0..N-1 (default: simulator)")
    parser.add_argument("--gradebook", choices=("postgres", "sqlite"), default="postgres",
                        help="the coordinator's gradebook: PostgreSQL (the fleet's) or the course's SQLite file")
    args = parser.parse_args()

    from graders.settings import ROOT
    from workshop import submissions
    from workshop.course import nbgrader_env
    from workshop.fleet import local
    from workshop.records import results_folder

    scratch = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    redis = local.Redis(scratch / "redis").start()
    postgres = local.Postgres().start() if args.gradebook == "postgres" else None
    os.environ.update({"WORKSHOP_BROKER_URL": redis.url, "WORKSHOP_WORKER_CACHE": str(scratch / "cache"),
                       "PATH": nbgrader_env()["PATH"]})
    if not args.gpu:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    counts = args.submissions * len(args.workers) if len(args.submissions) == 1 else args.submissions
    if len(counts) != len(args.workers):
        parser.error("--submissions takes one number, or one per worker count")
    runs = []
    try:
        for n_workers, n in zip(args.workers, counts):
            if postgres:
                os.environ["WORKSHOP_GRADEBOOK_URL"] = postgres.database(f"bench_{n_workers}")
            course = _course(scratch / f"course-{n_workers}", args.track, n, submissions)
            _warm_templates(course, args.track)
            workers = [local.Worker(f"bench{i}@{platform.node()}", scratch / f"w{n_workers}-{i}.log",
                                    dict(os.environ), ("--gpu", str(i)) if args.gpu else ("--sim",)).start()
                       for i in range(n_workers)]
            try:
                for w in workers:
                    w.wait_ready()
                runs.append(_run(course, args.track, n_workers, n))
            finally:
                for w in workers:
                    w.stop()
            redis_cli = ["redis-cli", "-p", str(redis.port), "flushall"]
            subprocess.run(redis_cli, check=True, capture_output=True)
    finally:
        redis.stop()
        if postgres:
            postgres.stop()

    record = {
        "what": f"workshop grade {args.track} on {'GPU' if args.gpu else 'simulator'} workers: submissions per "
                "minute by number of workers",
        "gradebook": args.gradebook, "gpu": _gpu() if args.gpu else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version(),
        "versions": {d: metadata.version(d) for d in ("celery", "kombu", "redis", "nbgrader", "numba-cuda")},
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "runs": runs, **_scaling(runs, args.class_size, args.project_gpus),
    }
    out = results_folder(None) / f"fleet-throughput-{args.track}-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print("| workers | submissions | wall s | per minute | mean grading s | overhead s/task |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['workers']} | {r['submissions']} | {r['wall_s']} | {r['per_minute']} | {r['mean_grading_s']} "
              f"| {r['overhead_s_per_task']} |")
    for line in record.get("projections", []):
        print(line)
    print(f"wrote {out}")


def _scaling(runs: list[dict], class_size: int | None, gpus: int) -> dict:
    """Each run's scaling against the one-worker run, and the labelled projections to ``class_size``."""
    one = next((r for r in runs if r["workers"] == 1), None)
    found: dict = {}
    if one:
        for r in runs:
            r["scaling"] = round(r["per_minute"] / (r["workers"] * one["per_minute"]), 3)
    if class_size:
        largest = max(runs, key=lambda r: r["workers"])
        found["projections"] = [
            f"PROJECTED: {class_size} submissions of this mix on {largest['workers']} worker(s) at the measured "
            f"{largest['per_minute']} per minute: {class_size / largest['per_minute']:.1f} min"]
        if one:
            linear = one["per_minute"] * gpus
            found["projections"].append(
                f"PROJECTED: on {gpus} GPU workers scaling linearly from one worker's {one['per_minute']} per minute: "
                f"{class_size / linear:.1f} min")
    return found


def _course(dest: Path, track: str, n: int, submissions) -> Path:
    """A course with ``track`` released and ``n`` submissions: for a CUDA track the reference, each group of its
    known-wrong solutions (`workshop.submissions.wrong_groups`) and the stub in turn; for the puzzles the
    reference and the stub alternating."""
    from graders import tracks
    from workshop import course as nbg
    course = nbg.make_course(dest, [track])
    release = nbg.release(course, track)
    if tracks.get(track).engine == "numba":
        mix = [submissions.reference_answers(), {}]
    else:
        mix = [submissions.cuda_answers(track),
               *(submissions.wrong_group_answers(track, group) for group in submissions.wrong_groups(track)), {}]
    for i in range(n):
        submissions.write(course, f"student{i:03d}", track, submissions.fill(release, mix[i % len(mix)]))
    return course


def _warm_templates(course: Path, track: str) -> None:
    """Build the workers' template (nbgrader generate_assignment) before timing: it is once per source."""
    from workshop.fleet import coordinator, isolated
    isolated._template(track, coordinator.source_notebooks(course, track))


def _run(course: Path, track: str, n_workers: int, n: int) -> dict:
    from gradebook.fleet_ledger import Ledger
    from workshop.fleet import coordinator
    start = time.monotonic()
    rc = coordinator.grade(course, track)
    wall = time.monotonic() - start
    config = coordinator.course_config(course)
    ledger = Ledger(coordinator.gradebook_url(course, config))
    rows = ledger.rows(track)
    ledger.close()
    if rc != 0 or len(rows) != n or {r["state"] for r in rows} != {"done"}:
        sys.exit(f"the run with {n_workers} worker(s) did not grade all {n}: {rows}")
    grading = statistics.mean(r["seconds"] for r in rows)
    return {"workers": n_workers, "submissions": n, "wall_s": round(wall, 1),
            "deliveries": max(r["deliveries"] or 0 for r in rows),
            "scores": {r["student"]: f"{r['score']:g}/{r['max_score']:g}" for r in rows},
            "per_minute": round(60 * n / wall, 2), "mean_grading_s": round(grading, 2),
            "overhead_s_per_task": round(wall / n - grading, 2) if n_workers == 1 else None}


def _gpu() -> dict:
    """The workers' GPU model and driver, as the grader records them with every timing."""
    from graders.cuda_engine.timing import driver_version
    from graders.gpu import detect_gpu
    info = detect_gpu()
    return {"name": info.name if info else None, "count": info.count if info else 0, "driver": driver_version()}


def _cpu() -> str:
    return next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor())


if __name__ == "__main__":
    main()
