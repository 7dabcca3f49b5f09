"""Benchmark the GEMM worklog's reference kernels with the grader itself, on a GPU worker.

    python3 benchmarks/gemm_bench.py [--sizes 4096 2048x1024x512 ...] [--budget-s 2] [--out DIR]
                                     [--merge FILE.json] [--no-ncu] [--ncu-only]

Grades every reference kernel (each in its own child, exactly as a submission is graded, cuBLAS SGEMM timed
in the same child) at each size, where ``ncu`` exists counts the shared-memory bank conflicts of the
vectorized, linearize, swizzle and warp-tiling references, and writes ``benchmarks/results/gemm-<date>.json``
(and a copy in ``--out``) with the GPU, date, versions, each kernel's GFLOP/s, % of cuBLAS, score and a
suggested target (95% of the measured ratio), plus the worklog chart next to it (``.png``).

The spec grades at its ``perf_shape`` (4096^3); another size is measured through the same grader with a
copy of the spec whose ``perf_shape`` is that size. ``--merge`` adds the sizes (and ncu counts) measured
here to a JSON written earlier (by ``tests/gpu/test_gemm_gpu.py``) and rewrites it and its chart.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))   # after an installed (or PYTHONPATH) graders

from graders.gpu import detect_gpu  # noqa: E402
from graders.kernel_spec import load_spec  # noqa: E402
from graders.perf_grade import grade_kernel  # noqa: E402

NCU_METRICS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
NCU_KERNELS = ("vectorized", "linearize", "swizzle", "warptiling")
NCU_SHAPE = (2048, 2048, 2048)
RESULTS = ROOT / "benchmarks/results"


def label(shape) -> str:
    return "x".join(map(str, shape))


def parse_size(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"a size is N or MxNxK, got {text!r}")
    return tuple(parts)


# BK = 16 with WM x WN = 32 x 64 spills under __launch_bounds__(256, 2), so it is not tried
WARPTILING_VARIANTS = [{"BK": 16, "WM": 64, "WN": 32}, {"BK": 8, "WM": 64, "WN": 32}, {"BK": 8, "WM": 32, "WN": 64}]


def spec_for_size(shape, folder: Path, warptiling_params: dict | None = None) -> Path:
    """A copy of the GEMM spec whose perf_shape is ``shape`` (kernel references made absolute), and
    optionally other params for the warp-tiling kernel."""
    spec = load_spec("gemm")
    text = spec.path.read_text()
    text, n = re.subn(r"^perf_shape = \[.*\]$", f"perf_shape = [{', '.join(map(str, shape))}]", text, flags=re.M)
    if n != 1:
        raise RuntimeError("could not find the [assignment] perf_shape line in the GEMM spec")
    if warptiling_params:
        line = "params = { " + ", ".join(f"{k} = {v}" for k, v in warptiling_params.items()) + " }"
        text, n = re.subn(r"^params = \{ BK = \d+, WM = \d+, WN = \d+ \}$", line, text, flags=re.M)
        if n != 1:
            raise RuntimeError("could not find the warp-tiling params line in the GEMM spec")
    text = re.sub(r'^reference = "(.*)"$', lambda m: f'reference = "{(spec.path.parent / m.group(1)).resolve()}"',
                  text, flags=re.M)
    suffix = "".join(f"-{k}{v}" for k, v in (warptiling_params or {}).items())
    path = folder / f"gemm-{label(shape)}{suffix}.toml"
    path.write_text(text)
    return path


def summarize(result: dict) -> dict:
    row = {"status": result["status"], "message": result["message"], "score": result["score"],
           "geometry": result.get("geometry"), "seconds": result.get("seconds"),
           "compile": result.get("compile", {}).get("resources")}
    timing = result.get("timing")
    if timing:
        row |= {"gflops": timing["kernel"]["throughput"] / 1e9, "cublas_gflops": timing["baseline"]["throughput"] / 1e9,
                "ratio": timing["ratio"], "suggested_target": round(0.95 * timing["ratio"], 3),
                "kernel_ms": timing["kernel"]["median_s"] * 1e3, "cublas_ms": timing["baseline"]["median_s"] * 1e3,
                "rse": timing["kernel"]["rse"], "samples": timing["kernel"]["samples"], "shape": timing["shape"]}
    if result["status"] not in ("ok",) and result.get("stderr"):
        row["stderr_tail"] = result["stderr"][-1500:]
    return row


def size_entry(rows: dict[str, dict]) -> dict:
    cublas = [r["cublas_gflops"] for r in rows.values() if r.get("cublas_gflops")]
    return {"cublas_gflops": sorted(cublas)[len(cublas) // 2] if cublas else None, "kernels": rows}


def grade_references(spec_file: str | Path, budget_s: float, kernel_ids=None, log=print) -> tuple[dict, dict]:
    """(rows by kernel id, environment) grading each reference of the spec at its perf_shape."""
    spec = load_spec(spec_file)
    rows, environment = {}, None
    for kid, kernel in spec.kernels.items():
        if kernel_ids and kid not in kernel_ids:
            continue
        result = grade_kernel(spec_file, kid, kernel.reference.read_text(), budget_s=budget_s)
        rows[kid] = summarize(result)
        environment = environment or result.get("environment")
        r = rows[kid]
        log(f"  {kid:<12} {r['status']:<10}" + (f"{r['gflops']:>9.0f} GFLOP/s {100 * r['ratio']:6.1f}% of cuBLAS "
                                                f"({r['cublas_gflops']:.0f})  {r['seconds']:.1f} s" if "ratio" in r
                                                else f" {r['message'][:100]}"))
    return rows, environment


def new_record(environment: dict | None) -> dict:
    spec = load_spec("gemm")
    gpu = detect_gpu()
    return {"gpu": (environment or {}).get("gpu") or (gpu.name if gpu else None),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "environment": environment,
            "targets_in_spec": spec.targets, "graded_shape": label(next(iter(spec.kernels.values())).perf_shape),
            "sizes": {}}


def write_record(record: dict, out: Path | None, name: str | None = None) -> Path:
    """Write the JSON and its chart to benchmarks/results (and ``out``); returns the JSON's path there."""
    from graders.worklog_chart import plot
    name = name or f"gemm-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path = RESULTS / name
    for folder in dict.fromkeys([RESULTS, out]):
        if folder:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(json.dumps(record, indent=2))
            try:
                plot(record, (folder / name).with_suffix(".png"))
            except Exception as exc:  # the numbers matter more than the picture
                print(f"chart not drawn: {exc}")
    return path


# --- ncu ----------------------------------------------------------------------------------------------

def ncu_launch() -> None:
    """Run under ncu: launch each NCU_KERNELS reference once at NCU_SHAPE."""
    import torch
    from graders.perf_child import Harness
    from graders.problems import PROBLEMS
    spec = load_spec("gemm")
    for kid in NCU_KERNELS:
        kernel = spec.kernel(kid)
        harness = Harness(PROBLEMS[kernel.kind], kernel.geometry, 0.25, seed=1)
        harness.load(kernel.reference.read_text(), kernel.function)
        _, out = harness.output(NCU_SHAPE)
        harness.launch(out, harness.inputs(NCU_SHAPE), NCU_SHAPE)
        torch.cuda.synchronize()


def ncu_bank_conflicts(timeout_s: float = 150) -> dict:
    """Shared-memory bank conflicts (loads, stores) of the NCU_KERNELS references, or why not measured."""
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if Path(p).exists()), None)
    if not ncu:
        return {"skipped": "ncu not found on this machine"}
    spec = load_spec("gemm")
    names = "|".join(spec.kernel(k).function for k in NCU_KERNELS)
    cmd = [ncu, "--clock-control", "none", "--metrics", ",".join(NCU_METRICS), "--csv", "-k", f"regex:^({names})$",
           sys.executable, str(Path(__file__).resolve()), "--ncu-launch"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"skipped": f"ncu timed out after {timeout_s:g} s"}
    found = parse_ncu_csv(done.stdout)
    if not found:
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERR" in line or "rror" in line]
        return {"skipped": f"ncu gave no bank-conflict counts (exit {done.returncode})",
                "errors": errors[:10], "output_tail": (done.stdout + done.stderr)[-2000:]}
    by_id = {kid: found.get(spec.kernel(kid).function, {}) for kid in NCU_KERNELS}
    return {"metrics": list(NCU_METRICS), "shape": list(NCU_SHAPE), "command": " ".join(cmd[:8]), "conflicts": by_id}


def parse_ncu_csv(text: str) -> dict[str, dict[str, int]]:
    """Kernel name -> {"ld": n, "st": n} from ``ncu --csv`` output (its ==PROF== lines skipped)."""
    rows = csv.DictReader(line for line in text.splitlines() if line.startswith('"'))
    found: dict[str, dict[str, int]] = {}
    for r in rows:
        metric = r.get("Metric Name", "")
        if metric in NCU_METRICS:
            key = "ld" if metric.endswith("op_ld.sum") else "st"
            found.setdefault(r["Kernel Name"], {})[key] = int(float(r["Metric Value"].replace(",", "")))
    return found


# --- main ---------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[(4096,) * 3, (2048,) * 3])
    parser.add_argument("--budget-s", type=float, default=2.0, help="timing budget per kernel and size")
    parser.add_argument("--out", type=Path, help="also write the JSON and chart here")
    parser.add_argument("--merge", type=Path, help="add to this JSON (from the GPU tests) instead of a new one")
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--variants", action="store_true",
                        help="also grade the warp-tiling reference with other BK / WM x WN")
    parser.add_argument("--variants-size", type=parse_size, default=(4096,) * 3)
    parser.add_argument("--ncu-only", action="store_true", help="only count bank conflicts")
    parser.add_argument("--ncu-launch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_launch:
        ncu_launch()
        return 0
    if detect_gpu() is None:
        print("gemm_bench: no CUDA GPU here; run it on a GPU worker")
        return 3
    if args.ncu_only:
        print(json.dumps(ncu_bank_conflicts(), indent=2))
        return 0
    record = json.loads(args.merge.read_text()) if args.merge and args.merge.exists() else None
    ok = True
    with tempfile.TemporaryDirectory(prefix="gemm-bench-") as tmp:
        for shape in args.sizes:
            print(f"size {label(shape)}:")
            rows, environment = grade_references(spec_for_size(shape, Path(tmp)), args.budget_s)
            record = record or new_record(environment)
            record["sizes"][label(shape)] = size_entry(rows)
            ok &= all(r["status"] == "ok" for r in rows.values())
        if args.variants:
            shape = args.variants_size
            print(f"warp-tiling variants at {label(shape)}:")
            record["warptiling_variants"] = variants = []
            for params in WARPTILING_VARIANTS:
                rows, _ = grade_references(spec_for_size(shape, Path(tmp), params), args.budget_s, ["warptiling"])
                variants.append({"params": params, "shape": label(shape)} | rows["warptiling"])
    if not args.no_ncu:
        record["ncu"] = ncu_bank_conflicts()
    path = write_record(record, args.out, args.merge.name if args.merge else None)
    print(table(record))
    print(f"wrote {path.relative_to(ROOT)} and {path.with_suffix('.png').relative_to(ROOT)}")
    return 0 if ok else 1


def table(record: dict) -> str:
    lines = [f"{record['gpu']}  (targets in spec: {record['targets_in_spec']}; graded at {record['graded_shape']})"]
    for size, entry in record["sizes"].items():
        lines.append(f"{size}: cuBLAS {entry['cublas_gflops'] or 0:.0f} GFLOP/s")
        lines.append(f"  {'kernel':<13}{'status':<10}{'GFLOP/s':>9}{'% cuBLAS':>10}{'ms':>9}{'rse':>8}{'points':>8}"
                     f"{'sugg.':>7}")
        for kid, r in entry["kernels"].items():
            if "ratio" in r:
                lines.append(f"  {kid:<13}{r['status']:<10}{r['gflops']:>9.0f}{100 * r['ratio']:>9.1f}%"
                             f"{r['kernel_ms']:>9.3f}{r['rse']:>8.4f}{r['score']['total']:>8.2f}"
                             f"{r['suggested_target']:>7.3f}")
            else:
                lines.append(f"  {kid:<13}{r['status']:<10}  {r['message'][:70]}")
    for v in record.get("warptiling_variants", []):
        lines.append(f"warptiling {v['params']} at {v['shape']}: {v['status']}" +
                     (f", {v['gflops']:.0f} GFLOP/s, {100 * v['ratio']:.1f}% of cuBLAS" if "ratio" in v else
                      f" {v['message'][:80]}"))
    ncu = record.get("ncu")
    if ncu:
        lines.append(f"ncu bank conflicts at {label(NCU_SHAPE)} (shared loads / stores): " + (
            ", ".join(f"{k} {_count(v.get('ld'))} / {_count(v.get('st'))}" for k, v in ncu["conflicts"].items()) if "conflicts" in ncu else ncu["skipped"]))
    return "\n".join(lines)


def _count(n) -> str:
    return f"{n:,}" if isinstance(n, int) else "?"


if __name__ == "__main__":
    raise SystemExit(main())
