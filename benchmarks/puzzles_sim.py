"""Seconds per submission for the whole puzzles track, autograded by nbgrader on numba-cuda's simulator.

    python -m benchmarks.puzzles_sim [--repeat N] [--label NAME]      # from the repository root

Grades the reference and the untouched stub N times each in a scratch course and writes
benchmarks/results/puzzles/puzzles-nbgrader-sim-[NAME-]<date-time>.json (CPU, cores, versions, commit, sandbox,
each run's seconds).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from graders.settings import ROOT
from workshop import submissions
from workshop.course import Course
from workshop.records import results_folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--label", default="", help="a word for the file name, e.g. the code version")
    args = parser.parse_args()
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"      # inherited by nbgrader: every kernel runs on the simulator
    course = Course(Path(tempfile.mkdtemp(prefix="puzzles-bench-")))
    seconds: dict[str, list[float]] = {"reference": [], "stub": []}
    for name, answers in (("reference", submissions.reference_answers()), ("stub", {})):
        for i in range(args.repeat):
            student = f"{name}{i}"
            course.submit(student, answers)
            seconds[name].append(round(course.autograde(student), 1))
            print(f"{student}: {seconds[name][-1]} s, {sum(course.scores(student).values()):g} points", flush=True)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    record = {
        "what": "nbgrader autograde of the puzzles track on the simulator, one submission at a time",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
        "versions": {d: metadata.version(d) for d in ("numba", "numba-cuda", "numpy", "nbgrader")},
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "sandbox": os.environ.get("WORKSHOP_SANDBOX", "on"),
        "seconds_per_submission": seconds,
        "median_s": {k: statistics.median(v) for k, v in seconds.items()},
    }
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    label = f"{args.label}-" if args.label else ""
    out = results_folder("puzzles") / f"puzzles-nbgrader-sim-{label}{stamp}.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
