"""How steady a grade is: each reference kernel graded several times, each round of the track's kernels in one
grading child as ``nbgrader autograde`` grades a submission, and the same kernel timed by an independent
one-process timer.

    python -m benchmarks.regrade_spread --track transpose --regrades 5
    python -m benchmarks.regrade_spread --track gemm --kernels warptiling,vectorized,blocktile1d

For each kernel: the ratio of every regrade (``ratio``: the lowest, which ``workshop targets TRACK RECORD``
reads), the spread (max - min) / median of the ratios, and the spread of the kernel's and the baseline's own
medians (which of the two moves); then the independent timer's ratio: the kernel compiled and launched
here, alternating with the baseline launch by launch, each launch after an L2 flush and a GPU-side sleep
(so the host's enqueue time is never timed), timed with its own pair of CUDA events, on one fixed input
set, the median of ``--reps`` launches each. Writes ``regrade-spread-<track>-<date-time>.json`` under
benchmarks/results/<track>/.
Needs a GPU; every grading uses the spec's time budget unless ``--budget`` says otherwise.
"""
from __future__ import annotations

import argparse
import statistics

from graders.cuda_engine.grade import grade_kernel
from graders.cuda_engine.spec import KernelSpec, load_spec, resolve_geometry
from graders.sandbox.session import ChildSession
from workshop.records import write_gpu_record


def spread(values: list[float]) -> float:
    """(max - min) / median."""
    return (max(values) - min(values)) / statistics.median(values)


def regrade(track: str, kernels: list[KernelSpec], regrades: int, budget_s: float | None) -> dict[str, dict]:
    """Each kernel's reference graded ``regrades`` times; each round grades every kernel in one grading child,
    as ``nbgrader autograde`` grades a submission (`graders.sandbox.session.ChildSession`)."""
    runs: dict[str, list[dict]] = {k.id: [] for k in kernels}
    failed: dict[str, dict] = {}
    for _ in range(regrades):
        with ChildSession():
            for kernel in kernels:
                if kernel.id in failed:
                    continue
                result = grade_kernel(track, kernel.id, kernel.reference.read_text(), budget_s=budget_s,
                                      sanitize=False, profile=False)
                if not result.ok:
                    failed[kernel.id] = {"status": str(result.status), "message": result.message}
                    continue
                timing = result.details["timing"]
                runs[kernel.id].append({
                    "ratio": timing["ratio"], "kernel_s": timing["kernel"]["median_s"],
                    "baseline_s": timing["baseline"]["median_s"], "samples": timing["kernel"]["samples"],
                    "points": result.points, "clocks_after": result.details.get("clocks_after"),
                    "phases": result.details.get("phases")})
    return {kernel.id: failed.get(kernel.id) or summary(kernel, runs[kernel.id]) for kernel in kernels}


def summary(kernel: KernelSpec, runs: list[dict]) -> dict:
    return {"runs": runs, "shape": list(kernel.perf_shape),
            "ratio": min(r["ratio"] for r in runs),   # the lowest: what `workshop targets` sets targets from
            "ratio_spread": spread([r["ratio"] for r in runs]),
            "kernel_spread": spread([r["kernel_s"] for r in runs]),
            "baseline_spread": spread([r["baseline_s"] for r in runs]),
            "median_ratio": statistics.median(r["ratio"] for r in runs)}


def independent_ratio(track: str, kernel: KernelSpec, reps: int) -> dict:
    """The kernel against its baseline, timed here launch by launch with CUDA events (not the grader's timer)."""
    import torch

    from graders.cuda_engine.child import Harness
    from graders.cuda_engine.problems import problem
    from graders.cuda_engine.timing import SLEEP_CYCLES, l2_cache_bytes

    definition = problem(kernel.kind)
    harness = Harness(definition, resolve_geometry(kernel, None, None, None), 0.5, seed=1, features=kernel.launch)
    harness.load(kernel.reference.read_text(), kernel.function)
    shape = kernel.perf_shape
    inputs = harness.inputs(shape)
    _, out = harness.output(shape)
    flush = torch.empty(2 * l2_cache_bytes() // 4, dtype=torch.float32, device="cuda")
    launches = {"kernel": lambda: harness.launch(out, inputs, shape),
                "baseline": lambda: definition.baseline(out, inputs)}
    times: dict[str, list[float]] = {name: [] for name in launches}
    with harness.enqueue():
        for rep in range(reps + 5):   # the first 5 rounds warm up
            for name, launch in launches.items():
                flush.fill_(float(rep))
                torch.cuda._sleep(SLEEP_CYCLES)   # the GPU is still busy when the launch is enqueued
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                launch()
                end.record()
                torch.cuda.synchronize()
                if rep >= 5:
                    times[name].append(start.elapsed_time(end) / 1e3)
    kernel_s, baseline_s = (statistics.median(times[n]) for n in ("kernel", "baseline"))
    return {"ratio": baseline_s / kernel_s, "kernel_s": kernel_s, "baseline_s": baseline_s,
            "baseline_spread": spread(times["baseline"]), "reps": reps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", required=True)
    parser.add_argument("--kernels", help="comma-separated kernel ids (default: every kernel of the track)")
    parser.add_argument("--regrades", type=int, default=5)
    parser.add_argument("--budget", type=float, help="timing budget per grading, seconds (default: the spec's)")
    parser.add_argument("--reps", type=int, default=30, help="launches of each for the independent timer")
    args = parser.parse_args()
    spec = load_spec(args.track)
    ids = args.kernels.split(",") if args.kernels else list(spec.kernels)
    kernels = regrade(args.track, [spec.kernel(k) for k in ids], args.regrades, args.budget)
    for kernel_id in ids:
        kernel = spec.kernel(kernel_id)
        if "runs" in kernels[kernel_id]:
            kernels[kernel_id]["independent"] = independent = independent_ratio(args.track, kernel, args.reps)
            independent["vs_grader"] = kernels[kernel_id]["median_ratio"] / independent["ratio"] - 1
        row = kernels[kernel_id]
        print(f"{kernel_id}: " + (f"ratio {row['median_ratio']:.4f}, spread {row['ratio_spread']:.2%} (kernel "
                                  f"{row['kernel_spread']:.2%}, baseline {row['baseline_spread']:.2%}); independent "
                                  f"{row['independent']['ratio']:.4f} ({row['independent']['vs_grader']:+.2%})"
                                  if "runs" in row else f"{row['status']}: {row['message']}"), flush=True)
    write_gpu_record(f"regrade-spread-{args.track}", f"{args.regrades} regrades of each {args.track} reference, "
                     "each round one grading child for every kernel (as autograde grades a submission), and an "
                     "independent one-process timer",
                     {"budget_s": args.budget or spec.time_budget_s, "kernels": kernels}, track=args.track)


if __name__ == "__main__":
    main()
