"""Where a submission's grading time goes: real ``nbgrader autograde`` of a track's reference (and its stub) on
this worker, each at the spec's own timing budget, with each kernel's phases (`graders.cuda_engine.grade`).

    python -m benchmarks.grading_time --track gemm
    python -m benchmarks.grading_time --track transpose --submissions reference stub reference

Prints, per submission, its wall time, its points and each kernel's phases and prepared work (sanitizer runs,
ncu counts: done before the first timed test, side by side), then the phases summed over the kernels (the rest of
the wall time is nbgrader, the notebook's sandboxed run and the untimed hidden tests), and writes
``grading-time-<track>-<date-time>.json`` into the track's results folder. Needs a GPU for CUDA tracks.
``--profile-last``: the last submission autograded once more under cProfile, whose top functions (by cumulative
time) say where nbgrader's own process spends a grading's wall time (the notebook's kernel and the grading children
are other processes: their time shows as waiting).
"""
from __future__ import annotations

import argparse
import io
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from graders import tracks
from graders.autograde import graded_cells, stored_results
from workshop.course import Autograding, Course, nbgrader_env
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers, reference_answers


# nbgrader's log lines that time the trusted grading's stages (`graders.autograde._Grading`)
STAGE_LINES = ("timed hidden tests prepared in", "timed hidden tests prepared together in", "each is prepared alone",
               "timed hidden tests begin")


def answers_of(track: str, submission: str) -> dict[str, str]:
    if submission == "stub":
        return {}
    return reference_answers() if tracks.get(track).engine == "numba" else cuda_answers(track)


def graded_results(course: Course, student: str) -> list[dict]:
    """What the trusted grader stored in the autograded notebook's graded cells (`graders.autograde.TrustedGrades`):
    a result a graded kernel."""
    return [result for cell in graded_cells(course.autograded(student)) for result in stored_results(cell)]


def kernel_phases(results: list[dict]) -> dict[str, dict[str, float]]:
    """Each graded kernel's phases."""
    return {result["test"]: result["phases"] for result in results if result.get("phases")}


def preparations(results: list[dict]) -> dict[str, dict[str, float]]:
    """Each graded kernel's prepared work (`graders.cuda_engine.grade.prepare_together`), in seconds: each
    sanitizer tool's run that decided its findings (``memcheck``, or ``memcheck batch of 8`` where one child
    launched 8 kernels under it) and its counter rule's ncu counts (``ncu``, ``ncu reference``, the latter about 0
    where the worker had it)."""
    found = {}
    for result in results:
        split = {}
        checked = result.get("sanitizer") or {}
        if checked.get("prepared"):
            batched = checked.get("batched", {})
            split |= {(f"{tool} batch of {batched[tool]}" if tool in batched else tool): seconds
                      for tool, seconds in checked.get("seconds", {}).items()}
        counted = (result.get("counter") or {}).get("seconds")
        if counted:
            split |= {"ncu": counted["yours"], "ncu reference": counted["reference"]}
        if split:
            found[result["test"]] = split
    return found


def profiled_autograde(course: Course, student: str, top: int = 30) -> str:
    """``nbgrader autograde`` of ``student`` again, under cProfile: its wall time and its top functions."""
    out = course.root / f"autograde-{student}.prof"
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "nbgrader", "autograde",
                    course.assignment, f"--student={student}", "--force"], cwd=course.root, env=nbgrader_env(),
                   capture_output=True, text=True, check=True)
    text = io.StringIO()
    pstats.Stats(str(out), stream=text).sort_stats("cumulative").print_stats(top)
    return f"{student} under cProfile: {time.monotonic() - start:.1f} s\n{text.getvalue()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", required=True)
    parser.add_argument("--submissions", nargs="+", default=["reference", "stub"],
                        help="reference or stub, in grading order (default: reference stub)")
    parser.add_argument("--profile-last", action="store_true",
                        help="autograde the last submission once more under cProfile and print its top functions")
    args = parser.parse_args()
    graded = []
    with tempfile.TemporaryDirectory() as scratch:
        grading = Autograding(Course(Path(scratch) / "course", args.track))
        for i, submission in enumerate(args.submissions):
            student = f"{submission}{i}"
            scores = grading.grade(student, answers_of(args.track, submission))
            results = graded_results(grading.course, student)
            phases = kernel_phases(results)
            total = Counter()
            for kernel, seconds in phases.items():
                total.update(seconds)
                print(f"  {kernel}: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
            summed = {k: round(v, 2) for k, v in total.most_common()}
            prepared = preparations(results)
            for kernel, seconds in prepared.items():
                print(f"  {kernel} prepared: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
            stages = [line.split("] ", 1)[-1] for line in grading.logs[student].splitlines()
                      if any(s in line for s in STAGE_LINES)]
            for line in stages:
                print(f"  {line}")
            print(f"{student}: {grading.seconds[student]} s, {sum(scores.values()):g} points; kernels' phases "
                  f"summed: {summed}", flush=True)
            graded.append({"submission": submission, "seconds": grading.seconds[student],
                           "points": sum(scores.values()), "scores": scores, "kernel_phases": phases,
                           "phases_summed": summed, "preparations": prepared, "stages": stages})
        if args.profile_last:
            print(profiled_autograde(grading.course, student), flush=True)
    write_gpu_record(f"grading-time-{args.track}", f"nbgrader autograde of {args.track} submissions "
                     f"({', '.join(args.submissions)}) at the spec's timing budget, with each kernel's phases",
                     {"submissions": graded}, dists=("nbgrader",), folder=args.track)


if __name__ == "__main__":
    main()
