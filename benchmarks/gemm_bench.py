"""Benchmark the GEMM worklog's reference kernels with the grader itself, on a GPU worker.

    WORKSHOP_SANDBOX=off python -m benchmarks.gemm_bench [--sizes 4096 2048x1024x512 ...] [--budget-s 2]
                                    [--out DIR] [--merge FILE.json] [--no-ncu] [--ncu-only] [--variants]
    WORKSHOP_SANDBOX=off python -m benchmarks.gemm_bench --track tensorcores --sizes 4096 8192 --timing-only
    python -m benchmarks.gemm_bench --track tensorcores --profile warptiling cublas
    python -m benchmarks.gemm_bench --profile warptiling variant0 cublas    # ncu's sections, as text
    WORKSHOP_SANDBOX=off python -m benchmarks.gemm_bench --track tensorcores --sizes --variants --timing-only

(from the repository root; unsandboxed, since it grades the course's own references with a copy of the spec
under /tmp, which the sandboxed child cannot read). Grades every reference kernel (each in its own child,
exactly as a submission is graded, cuBLAS SGEMM timed in the same child) at each size, where ``ncu`` exists counts the
shared-memory bank conflicts of the vectorized, linearize, swizzle and warp-tiling references
(`workshop.ncu`), and writes ``benchmarks/results/<track>/<track>-<date>.json`` (and a copy in ``--out``) with the
GPU, date, versions, each kernel's GFLOP/s, % of cuBLAS, score and a suggested target (95% of the measured
ratio), plus the worklog chart next to it (``.png``): the record of `workshop.records`, from which
``workshop targets gemm RECORD.json`` sets the spec's targets.

The spec grades at its ``perf_shape`` (4096^3); another size is measured through the same grader with a
copy of the spec whose ``perf_shape`` is that size. ``--track tensorcores`` does the same for the tensor-core
worklog (its record ``tensorcores-<date>.json``); ``--timing-only`` grades without compute-sanitizer and the
counter rules, which the track's GPU tests check, so that large sizes take minutes, not tens of them.
``--merge`` adds the sizes (and ncu counts) measured here to a JSON written earlier (by
``tests/gpu/test_gemm_gpu.py``) and rewrites it and its chart.
``--variants`` grades the track's warp-tiling reference at other launches (VARIANTS); ``--profile``
prints Nsight Compute's sections (speed of light, memory, occupancy, warp stalls...) for references,
variants and cuBLAS's own kernel at 4096^3.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from benchmarks.spec_copies import absolute_text, with_kernel_lines
from graders.cuda_engine import sass
from graders.cuda_engine.grade import grade_kernel
from graders.cuda_engine.spec import load_spec
from graders.gpu import detect_gpu
from graders.sandbox.run import sandbox_enabled
from graders.settings import ROOT
from workshop import ncu
from workshop.records import gemm_row, gemm_size_entry, gemm_table, label, new_gemm_record, write_gemm_record

PROFILE_SHAPE = (4096, 4096, 4096)     # --profile runs at the graded shape


def parse_size(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"a size is N or MxNxK, got {text!r}")
    return tuple(parts)


# Launches of each track's warp-tiling reference tried by --variants: (block, tile, params). In the GEMM
# worklog TM x TN outputs per thread is (TILE_Y / BLOCK_Y) x (TILE_X / BLOCK_X); in the tensor-core worklog a
# warp computes WM x WN of C in (TILE_Y / WM) x (TILE_X / WN) warps, and STAGES slabs of BK = 32 fit 48 KiB.
VARIANTS = {"gemm": [
    ((16, 16), (256, 128), {"BK": 8, "WM": 64, "WN": 64}),    # 256 threads, 8 x 16 each
    ((16, 16), (256, 128), {"BK": 16, "WM": 64, "WN": 64}),
    ((16, 16), (256, 128), {"BK": 8, "WM": 32, "WN": 128}),
    ((32, 8), (256, 128), {"BK": 8, "WM": 64, "WN": 64}),     # 256 threads, 16 x 8 each (the spec's launch)
    ((32, 16), (256, 128), {"BK": 16, "WM": 64, "WN": 32}),   # 512 threads, 8 x 8 each
    ((16, 8), (128, 128), {"BK": 8, "WM": 64, "WN": 64}),     # 128 threads, 16 x 8 each, 128 x 128 tile
    ((16, 8), (128, 128), {"BK": 8, "WM": 32, "WN": 128}),
    ((16, 16), (128, 128), {"BK": 8, "WM": 64, "WN": 32}),    # 256 threads, 8 x 8 each, 128 x 128 tile
], "tensorcores": [
    ((32, 4), (128, 128), {"BK": 32, "WM": 64, "WN": 64, "STAGES": 3}),   # the spec's launch: 4 warps
    ((32, 4), (128, 128), {"BK": 32, "WM": 64, "WN": 64, "STAGES": 2}),
    ((32, 8), (256, 128), {"BK": 32, "WM": 64, "WN": 64, "STAGES": 2}),   # 8 warps on 128 x 256 of C
    ((32, 8), (128, 256), {"BK": 32, "WM": 64, "WN": 64, "STAGES": 2}),
    ((32, 8), (128, 128), {"BK": 32, "WM": 64, "WN": 32, "STAGES": 3}),   # 8 warps of 128 registers, 2 blocks an SM
    ((32, 8), (128, 128), {"BK": 32, "WM": 32, "WN": 64, "STAGES": 3}),
    ((32, 4), (128, 64), {"BK": 32, "WM": 32, "WN": 64, "STAGES": 4}),
    ((32, 4), (64, 128), {"BK": 32, "WM": 64, "WN": 32, "STAGES": 4}),
]}


def spec_for_size(shape, folder: Path, free_warptiling: bool = False, track: str = "gemm") -> Path:
    """A copy of ``track``'s spec whose perf_shape is ``shape`` (kernel references made absolute); with
    ``free_warptiling`` the warp-tiling kernel's block, tile and params may be set when grading."""
    text = absolute_text(load_spec(track))
    text, n = re.subn(r"^perf_shape = \[.*\]$", f"perf_shape = [{', '.join(map(str, shape))}]", text, flags=re.M)
    if n != 1:
        raise RuntimeError(f"could not find the [assignment] perf_shape line in the {track} spec")
    if free_warptiling:   # and checked at multiples of 256 x 256 x 32, so that 256-row or -column tiles fit
        text = with_kernel_lines(text, "warptiling", {
            "student_geometry": "true",
            "check_shapes": "[[1024, 1024, 1024], [256, 512, 96], [512, 256, 1056]]"})
    path = folder / f"{track}-{label(shape)}{'-free' if free_warptiling else ''}.toml"
    path.write_text(text)
    return path


def grade_variants(shape, folder: Path, budget_s: float, track: str = "gemm", log=print) -> list[dict]:
    """``track``'s warp-tiling reference graded at each of its VARIANTS launches."""
    spec_file = spec_for_size(shape, folder, free_warptiling=True, track=track)
    source = load_spec(spec_file).kernel("warptiling").reference.read_text()
    found = []
    for block, tile, params in VARIANTS[track]:
        row = gemm_row(grade_kernel(spec_file, "warptiling", source, block=block, tile=tile, params=params,
                                    budget_s=budget_s).as_dict())
        found.append({"block": list(block), "tile": list(tile), "params": params, "shape": label(shape)} | row)
        log(f"  block {block} tile {tile} {params}: {row['status']}" +
            (f" {row['gflops']:.0f} GFLOP/s, {100 * row['ratio']:.1f}% of cuBLAS, {row['compile']}" if "ratio" in row
             else f" {row['message'][:120]}"))
    return found


def grade_references(spec_file: str | Path, budget_s: float, kernel_ids=None, log=print,
                     timing_only: bool = False) -> tuple[dict, dict]:
    """(rows by kernel id, environment) grading each reference of the spec at its perf_shape (with
    ``timing_only``, without compute-sanitizer and counter rules)."""
    spec = load_spec(spec_file)
    rows, environment = {}, None
    for kid, kernel in spec.kernels.items():
        if kernel_ids and kid not in kernel_ids:
            continue
        result = grade_kernel(spec_file, kid, kernel.reference.read_text(), budget_s=budget_s,
                              sanitize=not timing_only, profile=not timing_only).as_dict()
        rows[kid] = gemm_row(result)
        environment = environment or result.get("environment")
        r = rows[kid]
        log(f"  {kid:<12} {r['status']:<10}" + (f"{r['gflops']:>9.0f} GFLOP/s {100 * r['ratio']:6.1f}% of cuBLAS "
                                                f"({r['cublas_gflops']:.0f})  {r['seconds']:.1f} s" if "ratio" in r
                                                else f" {r['message'][:100]}"))
    return rows, environment


# --- ncu ----------------------------------------------------------------------------------------------

def ncu_launch(subjects: list[str], shape, track: str = "gemm") -> None:
    """Run under ncu: launch each subject once at ``shape``. A subject is a kernel id of ``track`` (its
    reference at the spec's launch), ``variant<i>`` (the track's warp-tiling reference at VARIANTS[track][i])
    or ``cublas`` (the baseline the warp-tiling step is timed against: cuBLAS SGEMM with TF32 off in the GEMM
    worklog, cuBLAS in that step's format in the tensor-core one)."""
    from graders.cuda_engine.spec import resolve_geometry
    spec = load_spec(track)
    for subject in subjects:
        if subject == "cublas":
            ncu.launch_baseline(spec.kernel("warptiling"), shape)
        elif subject.startswith("variant"):
            kernel = spec.kernel("warptiling")
            block, tile, params = VARIANTS[track][int(subject[len("variant"):])]
            ncu.launch_kernel(kernel, resolve_geometry(replace(kernel, student_geometry=True), block, tile, params),
                              shape)
        else:
            ncu.launch_kernel(spec.kernel(subject), spec.kernel(subject).geometry, shape)


def ncu_profile(subjects: list[str], track: str = "gemm", timeout_s: float = 240) -> str:
    """Nsight Compute's sections (`workshop.ncu.PROFILE_SECTIONS`) for ``subjects``
    (see `ncu_launch`) at PROFILE_SHAPE, as ncu prints them. Every kernel whose name looks like a GEMM's is
    profiled (ours are sgemm_* and tc_*; cuBLAS's name their tile, e.g. sm90_xmma_gemm_*, *_sgemm_*, nvjet_*)."""
    ncu_binary = sass.find_tool("ncu")
    if not ncu_binary:
        return "ncu not found on this machine"
    cmd = [str(ncu_binary), "--clock-control", "none", *(a for s in ncu.PROFILE_SECTIONS for a in ("--section", s)),
           "-k", "regex:gemm|xmma|cutlass|sm90|nvjet|^tc_",
           sys.executable, "-m", "benchmarks.gemm_bench", "--track", track, "--ncu-launch", *subjects,
           "--ncu-shape", label(PROFILE_SHAPE)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"ncu timed out after {timeout_s:g} s"
    return " ".join(cmd[:3]) + " ...\n" + done.stdout + done.stderr[-3000:]


# --- main ---------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=parse_size, default=[(4096,) * 3, (2048,) * 3],
                        help="sizes to grade every reference at (none: only --variants)")
    parser.add_argument("--track", choices=["gemm", "tensorcores", "hopper"], default="gemm")
    parser.add_argument("--timing-only", action="store_true",
                        help="no compute-sanitizer, no counter rules (the track's GPU tests check them)")
    parser.add_argument("--budget-s", type=float, default=2.0, help="timing budget per kernel and size")
    parser.add_argument("--out", type=Path, help="also write the JSON and chart here")
    parser.add_argument("--merge", type=Path, help="add to this JSON (from the GPU tests) instead of a new one")
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--variants", action="store_true",
                        help="also grade the warp-tiling reference at the launches in VARIANTS[track]")
    parser.add_argument("--variants-size", type=parse_size, default=(4096,) * 3)
    parser.add_argument("--ncu-only", action="store_true", help="only count bank conflicts")
    parser.add_argument("--profile", nargs="+", metavar="SUBJECT",
                        help="print ncu's speed-of-light, occupancy and warp-stall sections for these (kernel ids, "
                             "variant<i>, cublas) and stop")
    parser.add_argument("--ncu-launch", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--ncu-shape", type=parse_size, default=PROFILE_SHAPE, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_launch:
        ncu_launch(args.ncu_launch, args.ncu_shape, args.track)
        return 0
    if args.track != "gemm" and args.ncu_only:
        parser.error("--ncu-only counts the GEMM worklog's bank conflicts")
    if detect_gpu() is None:
        print("gemm_bench: no CUDA GPU here; run it on a GPU worker")
        return 3
    if args.ncu_only:
        print(json.dumps(ncu.gemm_bank_conflicts(), indent=2))
        return 0
    if args.profile:
        print(ncu_profile(args.profile, args.track))
        return 0
    if sandbox_enabled() and (args.sizes or args.variants):
        print("gemm_bench: every size and launch is graded with a copy of the spec that the sandboxed grading "
              "child cannot see (it lies under the private /tmp); the references are the course's own code, so "
              "run it with WORKSHOP_SANDBOX=off")
        return 2
    record = json.loads(args.merge.read_text()) if args.merge and args.merge.exists() else None
    ok = True
    with tempfile.TemporaryDirectory(prefix="gemm-bench-") as tmp:
        for shape in args.sizes:
            print(f"size {label(shape)}:")
            rows, environment = grade_references(spec_for_size(shape, Path(tmp), track=args.track), args.budget_s,
                                                 timing_only=args.timing_only)
            record = record or new_gemm_record(environment, args.track)
            record["sizes"][label(shape)] = gemm_size_entry(rows)
            ok &= all(r["status"] == "ok" for r in rows.values())
        if args.variants:
            shape = args.variants_size
            print(f"warp-tiling variants at {label(shape)}:")
            record = record or new_gemm_record(None, args.track)
            record["warptiling_variants"] = grade_variants(shape, Path(tmp), args.budget_s, args.track)
    if not args.no_ncu and args.track == "gemm":
        record["ncu"] = ncu.gemm_bank_conflicts()
    path = write_gemm_record(record, args.out, args.merge.name if args.merge else None)
    print(gemm_table(record))
    print(f"wrote {path.relative_to(ROOT)} and {path.with_suffix('.png').relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
