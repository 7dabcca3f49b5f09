"""Where a model problem's timed call goes, on a GPU: for eager, ``torch.compile`` and the track's reference
``ModelNew``, the grader's own timed call (`graders.model_engine.child.Judge.time`), the host's part of a call (from
the call to its return, before the device-wide synchronisation that ends the timer; no profiler running) and the
kernels a call launched with their device times (``torch.profiler``, other calls, one at a time). A call's grader
time far above its kernels' time is host work (Python, guards, launches, allocation) inside the timer.

    python -m benchmarks.model_call_split --track kernelbench --problems relu softmax \
        [--candidate relu:.sweep/relu_cuda.py ...]

Runs in this process, unsandboxed: the track's own reference, and each ``--candidate PROBLEM:PATH`` (a ``ModelNew``
the staff wrote, e.g. another form of a reference) beside it; never a submission. Without a GPU it runs on the
CPU at the problems' ``cpu_sizes`` (a check of the script; its times say nothing of a GPU).
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from graders.model_engine.child import Judge, load_submission, problem_namespace, problem_text
from graders.model_engine.spec import ModelSpec, load_model_spec

CALLS = 10


def split(judge: Judge, model, calls: int) -> dict:
    """The grader's median time, without and with each timed output checked (as a submission's are: `Judge.time`'s
    ``check``); the host's median part of a call (from the call to its return, no profiler
    running: the profiler's own host work is several times a call's); each kernel's mean device time a call,
    from separate calls under ``torch.profiler``."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    graded = judge.time(model, 0, calls, check=False)["median_s"]
    checked = judge.time(model, 0, calls, check=True)["median_s"]   # as a submission is timed
    host, kernels = [], {}
    for n in range(calls):
        given = judge._clones(judge.inputs(1000 + n))
        judge.synchronize()
        begin = time.perf_counter()
        with torch.no_grad():
            out = model(*given)
        host.append(time.perf_counter() - begin)
        judge.synchronize()
        del out
    for n in range(calls):
        given = judge._clones(judge.inputs(2000 + n))
        if judge.cuda:
            judge.flush.zero_()
        judge.synchronize()
        with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * judge.cuda) as prof:
            with torch.no_grad():
                out = model(*given)
            judge.synchronize()
        for event in prof.events():
            if event.device_type == torch.autograd.DeviceType.CUDA:
                kernels.setdefault(event.name, []).append(event.device_time_total)
        del out
    return {"graded_ms": graded * 1e3, "checked_ms": checked * 1e3, "host_ms": statistics.median(host) * 1e3,
            "kernels_us": {name: (len(times) / calls, sum(times) / calls) for name, times in kernels.items()}}


def judge_for(spec: ModelSpec, problem_id: str, device: str) -> Judge:
    """The grader's Judge of one problem, at its sizes on a GPU, at its ``cpu_sizes`` on the CPU."""
    import torch
    problem = spec.problem(problem_id)
    sizes = problem.sizes if device == "cuda" else problem.cpu_sizes
    namespace = problem_namespace(problem_text(spec.path.parent / "problem.py", problem_id), sizes)
    return Judge(torch, problem, namespace, device, seed=0)


def main(argv: list[str] | None = None) -> int:
    import torch
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--track", default="kernelbench")
    parser.add_argument("--problems", nargs="*", help="default: every problem of the track")
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--candidate", action="append", default=[], metavar="PROBLEM:PATH",
                        help="a staff-written ModelNew of PROBLEM measured beside its reference")
    args = parser.parse_args(argv)
    candidates: dict[str, list[str]] = {}
    for given in args.candidate:
        pid, _, path = given.partition(":")
        candidates.setdefault(pid, []).append(path)
    spec = load_model_spec(args.track)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"{torch.cuda.get_device_name() if device == 'cuda' else 'the CPU'}, torch {torch.__version__}")
    for pid in args.problems or sorted(spec.problems):
        judge = judge_for(spec, pid, device)
        models = {"eager": judge.reference, "compile": torch.compile(judge.reference),
                  "reference ModelNew": judge.build(load_submission(spec.problem(pid).reference.read_text()))}
        for path in candidates.get(pid, []):
            models[path] = judge.build(load_submission(Path(path).read_text()))
        for kind, model in models.items():
            found = split(judge, model, args.calls)
            kernels_us = sum(total for _, total in found["kernels_us"].values())
            print(f"{pid} {kind}: graded {found['graded_ms']:.4f} ms (with each output checked, as a submission's: "
                  f"{found['checked_ms']:.4f} ms), host part of a call {found['host_ms']:.4f} ms, "
                  f"kernels {kernels_us / 1e3:.4f} ms")
            for name, (count, total) in sorted(found["kernels_us"].items(), key=lambda kv: -kv[1][1]):
                print(f"    {total:9.1f} us  x{count:g}  {name[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
