"""Where a puzzle's GPU grading time goes: a whole reference notebook took 18.4 s on an H100, each puzzle's GPU run
10-14 s and its compute-sanitizer run 8-13 s with the other puzzles' side by side
(benchmarks/results/puzzles/puzzles-grading-gpu-20261207-1909.md). For the puzzles named (their reference kernels,
on the hidden cases of one seed), in the grader's own sandboxed children, each the median of ``--repeats``:

- ``gpu run``: one `graders.numba_engine.child` child on the GPU, alone;
- ``memcheck``, ``racecheck``: that child under the tool, as `graders.numba_engine.grade.sanitizer_finding` runs it;
- ``simulator``: the child on numba-cuda's simulator (a fresh child, not a fork);

then every named puzzle's GPU runs at once, their memcheck runs at once, and both at once (as a grading starts
them). First of all, unsandboxed, one process's split of a GPU run: imports, CUDA's start, the first ``handle`` (the
kernel's JIT compile and its cases), a second one, then each other named puzzle's in the same process (what one
GPU child per submission would cost), alone and under memcheck.

Run on a GPU worker: ``python -m benchmarks.puzzle_run_cost [--puzzles map shared matmul] [--alone map]
[--repeats 3]``. Prints a table and writes ``puzzle-run-cost-<date-time>.json`` under benchmarks/results/puzzles/.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from benchmarks.sanitizer_cost import timed
from graders import settings
from graders.numba_engine import catalogue
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.sandbox.run import run_child
from workshop.records import write_gpu_record
from workshop.submissions import reference_answers

CHILD = "graders.numba_engine.child"
SEED = 7
# One process's split of a GPU run: printed as JSON on its last line.
SPLIT = """
import json, sys, time
start = time.monotonic()
from numba import cuda
from graders.numba_engine import child
imported = time.monotonic()
cuda.current_context()
context = time.monotonic()
requests = json.loads(sys.argv[1])
first = child.handle(requests[0])
once = time.monotonic()
child.handle(requests[0])
twice = time.monotonic()
others = {}
for request in requests[1:]:
    began = time.monotonic()
    status = child.handle(request)["status"]
    others[request["puzzle"]] = [round(time.monotonic() - began, 3), status]
print(json.dumps({"imports": imported - start, "cuda start": context - imported, "first handle": once - context,
                  "second handle": twice - once, "status": first["status"], "then each puzzle": others,
                  "all": time.monotonic() - start}))
"""


def request_of(puzzle_id: str, target: str = "gpu") -> dict:
    """The hidden-cases request for ``puzzle_id``'s reference kernel."""
    puzzle = catalogue.get(puzzle_id)
    source = kernel_source_from_cell(reference_answers()[puzzle_id], puzzle.kernel_name)   # as the grader parses it
    return {"puzzle": puzzle_id, "source": source, "kernel_name": puzzle.kernel_name, "mode": "hidden",
            "seed": SEED, "target": target}


def child_run(request: dict, wrapper: tuple[str, ...] = ()) -> Callable[[], None]:
    """One sandboxed child answering ``request`` (under ``wrapper``); raises unless it answered OK."""
    def run() -> None:
        sim = request["target"] == "sim"
        done = run_child(CHILD, request, timeout_s=300, gpu=not sim, wrapper=wrapper,
                         env={"NUMBA_ENABLE_CUDASIM": "1" if sim else "0"})
        if not done.ok or done.answer.get("status") != "ok":
            raise RuntimeError(f"{request['puzzle']}: {done.status} {done.message} {done.answer}")
    return run


def at_once(runs: list[Callable[[], None]]) -> Callable[[], None]:
    def run() -> None:
        with ThreadPoolExecutor(len(runs)) as pool:
            list(pool.map(lambda r: r(), runs))
    return run


def split(requests: list[dict], wrapper: tuple[str, ...] = ()) -> dict:
    """`SPLIT` in a fresh unsandboxed process (under ``wrapper``): its phases in seconds."""
    done = subprocess.run([*wrapper, sys.executable, "-c", SPLIT, json.dumps(requests)], capture_output=True,
                          text=True, cwd=settings.PACKAGE_ROOT, timeout=300,
                          env=os.environ | {"NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": os.pathsep.join(
                              [str(settings.PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])})
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the split printed nothing: {done.stdout[-500:]} {done.stderr[-500:]}")
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(lines[-1]).items()}


def main() -> None:
    from graders.cuda_engine.sanitizer import tool_wrapper
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puzzles", nargs="+", default=[p.id for p in catalogue.PUZZLES])
    parser.add_argument("--alone", nargs="*", help="the puzzles whose pieces are timed one by one (default: every "
                        "named puzzle)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    requests = [request_of(p) for p in args.puzzles]
    one_process = {"alone": split(requests), "under memcheck": split(requests, tool_wrapper("memcheck"))}
    for name, phases in one_process.items():
        print(f"{args.puzzles[0]} and the others in one process, {name}: {phases}", flush=True)
    gpu_runs = [child_run(request_of(p)) for p in args.puzzles]
    memchecks = [child_run(request_of(p), tool_wrapper("memcheck", catalogue.get(p).kernel_name))
                 for p in args.puzzles]
    together = {"gpu runs at once": timed(at_once(gpu_runs), args.repeats),
                "memcheck runs at once": timed(at_once(memchecks), args.repeats),
                "both at once": timed(at_once(gpu_runs + memchecks), args.repeats)}
    for name, found in together.items():
        print(f"{len(args.puzzles)} puzzles, {name}: {found['median_s']:.2f} s {found['seconds']}", flush=True)
    measured: dict[str, dict] = {}
    for puzzle_id in args.puzzles if args.alone is None else args.alone:
        request, name = request_of(puzzle_id), catalogue.get(puzzle_id).kernel_name
        pieces = {"gpu run": child_run(request), "memcheck": child_run(request, tool_wrapper("memcheck", name)),
                  "simulator": child_run(request_of(puzzle_id, "sim"))}
        if "cuda.shared.array" in request["source"]:
            pieces["racecheck"] = child_run(request, tool_wrapper("racecheck", name))
        measured[puzzle_id] = {piece: timed(run, args.repeats) for piece, run in pieces.items()}
        print(f"{puzzle_id:>12}: " + ", ".join(f"{p} {m['median_s']:.2f} s" for p, m in measured[puzzle_id].items()),
              flush=True)
    write_gpu_record("puzzle-run-cost", "a puzzle's GPU grading time by piece: the GPU run, compute-sanitizer, the "
                     "simulator, alone and side by side, and one process's split", {
                         "puzzles": args.puzzles, "repeats": args.repeats, "seed": SEED, "measured": measured,
                         "together": together, "one_process": one_process},
                     folder="puzzles")


if __name__ == "__main__":
    main()
