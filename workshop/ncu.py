"""Nsight Compute (``ncu``) metrics of a track's reference kernels, each launched once in a child process
that ncu profiles. ncu runs this module as that child:

    python -m workshop.ncu TRACK SHAPE KERNEL_ID...     # e.g. gemm 2048x2048x2048 vectorized swizzle
    python -m workshop.ncu --baseline attention 4x16x4096x4096x128 flash_tc   # and SDPA, which it is timed against

Only the launches its ``-k`` filter names (the kernels' ``extern "C"`` names) are profiled, so torch's own
kernels (random inputs, NaN fills) are not. `gemm_bank_conflicts` is the GEMM worklog record's ``ncu`` entry.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass, field

from graders.cuda_engine.counters import METRICS, parse_csv
from graders.cuda_engine.sass import find_tool
from graders.settings import ROOT

GEMM_BANK_METRICS = dict(zip(("ld", "st"), METRICS["shared_bank_conflicts"][0]))
GEMM_BANK_KERNELS = ("vectorized", "linearize", "swizzle", "warptiling")
GEMM_BANK_SHAPE = (2048, 2048, 2048)
# what a profile of a reference and its baseline prints (gemm_bench --profile, gpu_trusted.sh profile): where
# time goes (speed of light, memory, compute), how many warps run and why they stall
PROFILE_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "Occupancy", "LaunchStats",
                    "SchedulerStats", "WarpStateStats")


@dataclass
class NcuRun:
    """What one ncu run counted: ``counts[kernel function][metric]``, or ``problem`` saying why nothing."""
    command: list[str]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    problem: str = ""
    output: str = ""     # ncu's stdout and stderr


def launch_kernel(kernel, geometry, shape) -> None:
    """Launch ``kernel``'s reference once at ``shape`` with ``geometry`` (a `KernelSpec`, a `Geometry`)."""
    from graders.cuda_engine.launch_child import launch_once
    launch_once(kernel, geometry, kernel.reference.read_text(), shape, seed=1)


def launch_baseline(kernel, shape) -> None:
    """Launch the library operation ``kernel`` is timed against (its problem's baseline) once at ``shape``."""
    import torch

    from graders.cuda_engine.problems import problem
    definition = problem(kernel.kind)
    inputs = definition.make_inputs(shape, torch.Generator(device="cuda").manual_seed(1))
    definition.baseline(torch.empty(definition.out_shape(shape), device="cuda"), inputs)
    torch.cuda.synchronize()


def measure(track: str, kernel_ids, shape, metrics, timeout_s: float) -> NcuRun:
    """Run ncu on this module's launch of the references ``kernel_ids`` of ``track`` at ``shape``."""
    from graders.cuda_engine.spec import load_spec
    ncu = find_tool("ncu")
    if not ncu:
        return NcuRun([], problem="ncu not found on this machine")
    spec = load_spec(track)
    names = "|".join(spec.kernel(k).function for k in kernel_ids)
    command = [str(ncu), "--clock-control", "none", "--target-processes", "all", "--metrics", ",".join(metrics),
               "--csv", "-k", f"regex:^({names})$", sys.executable, "-m", "workshop.ncu", track,
               "x".join(map(str, shape)), *kernel_ids]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        return NcuRun(command, problem=f"ncu timed out after {timeout_s:g} s",
                      output=_text(exc.stdout) + _text(exc.stderr))
    counts = parse_csv(done.stdout, metrics)
    problem = "" if counts else f"ncu gave no {', '.join(metrics)} (exit {done.returncode})"
    return NcuRun(command, counts, problem, done.stdout + done.stderr)


def gemm_bank_conflicts(timeout_s: float = 150) -> dict:
    """Shared-memory bank conflicts (loads, stores) of the GEMM_BANK_KERNELS references, or why not measured."""
    from graders.cuda_engine.spec import load_spec
    run = measure("gemm", GEMM_BANK_KERNELS, GEMM_BANK_SHAPE, tuple(GEMM_BANK_METRICS.values()), timeout_s)
    if not run.counts:
        errors = [line for line in run.output.splitlines() if "ERR" in line or "rror" in line]
        return {"skipped": run.problem, "errors": errors[:10], "output_tail": run.output[-2000:]}
    spec = load_spec("gemm")
    counts = {kid: run.counts.get(spec.kernel(kid).function, {}) for kid in GEMM_BANK_KERNELS}
    conflicts = {kid: {key: found[metric] for key, metric in GEMM_BANK_METRICS.items() if metric in found}
                 for kid, found in counts.items()}
    return {"metrics": list(GEMM_BANK_METRICS.values()), "shape": list(GEMM_BANK_SHAPE),
            "command": " ".join(run.command), "conflicts": conflicts}


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def main(argv: list[str] | None = None) -> int:
    from graders.cuda_engine.spec import load_spec
    parser = argparse.ArgumentParser(description="launch reference kernels once each (run under ncu)")
    parser.add_argument("track")
    parser.add_argument("shape", help="e.g. 2048x2048x2048")
    parser.add_argument("kernel_ids", nargs="+")
    parser.add_argument("--baseline", action="store_true", help="after each kernel, its library baseline once")
    args = parser.parse_args(argv)
    spec = load_spec(args.track)
    shape = tuple(int(n) for n in args.shape.split("x"))
    for kid in args.kernel_ids:
        launch_kernel(spec.kernel(kid), spec.kernel(kid).geometry, shape)
        if args.baseline:
            launch_baseline(spec.kernel(kid), shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())
