"""Benchmark the transpose ladder's reference kernels with the grader itself, on a GPU worker.

    python -m benchmarks.transpose_bench [--out DIR] [--budget-s 5]      # from the repository root

Grades every reference kernel (each in its own child, exactly as a submission is graded), the "best"
reference at a few geometries, and, where ``ncu`` exists, counts shared-memory bank conflicts of the tiled
and padded kernels. Prints a table and writes ``benchmarks/results/transpose/transpose-<date>.json`` (and a copy in
``--out``): GPU, date, versions, clocks, D2D copy GB/s, each kernel's GB/s, ratio, score and a suggested
target (95% of the measured ratio) for the spec; ``workshop targets transpose RECORD.json`` sets the spec's
targets from it.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from graders.cuda_engine.grade import grade_kernel
from graders.cuda_engine.spec import load_spec
from graders.gpu import detect_gpu
from workshop import ncu
from workshop.records import results_folder

NCU_METRIC = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
NCU_KERNELS = ("tiled", "padded")
NCU_SHAPE = (4096, 4096)
NCU_TIMEOUT_S = 90
BEST_GEOMETRIES = [((32, 8), (32, 32)), ((32, 16), (32, 32)), ((32, 16), (64, 64)), ((32, 8), (64, 32)),
                   ((32, 32), (64, 64))]   # and the spec's default, (32, 8) / (64, 64), graded as "best"


def summarize(result: dict) -> dict:
    row = {"status": result["status"], "message": result["message"], "score": result["score"],
           "geometry": result.get("geometry"), "compile": result.get("compile", {}).get("resources"),
           "seconds": result.get("seconds")}
    for key in ("stderr", "traceback"):
        if result.get(key):
            row[key] = result[key][-2000:]
    timing = result.get("timing")
    if timing:
        row |= {"kernel_gbps": timing["kernel"]["throughput"] / 1e9,
                "copy_gbps": timing["baseline"]["throughput"] / 1e9,
                "ratio": timing["ratio"], "suggested_target": round(0.95 * timing["ratio"], 3),
                "kernel_ms": timing["kernel"]["median_s"] * 1e3, "rse": timing["kernel"]["rse"],
                "samples": timing["kernel"]["samples"], "shape": timing["shape"]}
    return row


def ncu_bank_conflicts() -> dict:
    """NCU_METRIC of the NCU_KERNELS references at NCU_SHAPE, by kernel function, or why not measured."""
    run = ncu.measure("transpose", NCU_KERNELS, NCU_SHAPE, (NCU_METRIC,), NCU_TIMEOUT_S)
    if not run.counts:
        return {"skipped": run.problem, "command": " ".join(run.command), "output_tail": ncu_errors(run.output)}
    return {"metric": NCU_METRIC, "shape": list(NCU_SHAPE), "command": " ".join(run.command),
            "conflicts": {name: found[NCU_METRIC] for name, found in run.counts.items()}}


def ncu_errors(output: str, limit: int = 2500) -> str:
    """What to show when ncu failed: its ==ERROR==/==WARNING== lines and the target's traceback, else the tail."""
    lines = output.splitlines()
    keep = [line for line in lines if line.startswith(("==ERROR==", "==WARNING==")) or "Error" in line
            or "error" in line]
    tail = "\n".join(lines[-25:])
    text = ("\n".join(keep[-15:]) + "\n--- last lines ---\n" + tail) if keep else tail
    return text[-limit:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--budget-s", type=float, default=5.0, help="timing budget per kernel")
    args = parser.parse_args()
    gpu = detect_gpu()
    if gpu is None:
        print("transpose_bench: no CUDA GPU here; run it on a GPU worker")
        return 3
    spec = load_spec("transpose")
    kernels, environment = {}, None
    for kid, kernel in spec.kernels.items():
        result = grade_kernel("transpose", kid, kernel.reference.read_text(), budget_s=args.budget_s).as_dict()
        kernels[kid] = summarize(result)
        environment = environment or result.get("environment")
    best = spec.kernel("best")
    best_geometries = []
    for block, tile in BEST_GEOMETRIES:
        result = grade_kernel("transpose", "best", best.reference.read_text(), block=block, tile=tile,
                              budget_s=args.budget_s).as_dict()
        best_geometries.append(summarize(result))
    copy_gbps = kernels["copy"].get("copy_gbps")
    record = {"gpu": gpu.name, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "environment": environment,
              "best_default": {"block": list(best.geometry.block), "tile": list(best.geometry.tile)},
              "targets_in_spec": spec.targets, "copy_gbps": copy_gbps, "kernels": kernels,
              "best_geometries": best_geometries, "ncu": ncu_bank_conflicts()}
    name = f"transpose-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for folder in [results_folder("transpose"), args.out]:
        if folder:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(json.dumps(record, indent=2))
    print(table(record))
    print(f"wrote {results_folder('transpose') / name}")
    return 0 if all(k["status"] == "ok" for k in kernels.values()) else 1


def table(record: dict) -> str:
    copy = f"{record['copy_gbps']:.0f} GB/s" if record.get("copy_gbps") else "not measured"
    lines = [f"{record['gpu']}  D2D copy {copy}  (targets in spec: "
             f"{record['targets_in_spec']}; best's default geometry {record.get('best_default')})",
             f"{'kernel':<22}{'status':<10}{'GB/s':>8}{'ratio':>8}{'ms':>9}{'rse':>8}{'points':>9}{'sugg.':>8}"]
    rows = [(kid, r) for kid, r in record["kernels"].items()]
    rows += [(f"best {g['geometry']['block']}/{g['geometry']['tile']}".replace(" ", ""), g)
             for g in record["best_geometries"] if g.get("geometry")]
    for name, r in rows:
        if "ratio" in r:
            lines.append(f"{name:<22}{r['status']:<10}{r['kernel_gbps']:>8.0f}{r['ratio']:>8.3f}"
                         f"{r['kernel_ms']:>9.4f}{r['rse']:>8.4f}{r['score']['total']:>9.2f}"
                         f"{r['suggested_target']:>8.3f}")
        else:
            lines.append(f"{name:<22}{r['status']:<14}{r['message'][:200]}")
    ncu = record["ncu"]
    lines.append("ncu bank conflicts (shared loads, 4096x4096): " + (
        ", ".join(f"{k} {v:,}" for k, v in ncu["conflicts"].items()) if "conflicts" in ncu else ncu["skipped"]))
    if "conflicts" not in ncu and ncu.get("output_tail"):
        lines += ["  ncu command: " + ncu.get("command", ""), "  ncu said:"]
        lines += ["    " + line for line in ncu["output_tail"].splitlines()]
    for name, r in rows:
        if r["status"] != "ok" and (r.get("stderr") or r.get("traceback")):
            lines.append(f"  {name}: {(r.get('traceback') or '') + (r.get('stderr') or '')}"[-1500:])
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
