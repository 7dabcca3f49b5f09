"""Records of GPU runs: JSON files in ``benchmarks/results/<track>/`` for a track's, and
``benchmarks/results/platform/`` for one that is not one track's (`results_folder`; the root is
`graders.settings.RESULTS`), each copied to ``$OUT`` when that is set (a device run brings back what is there).

- `write_gpu_record`: what a run measured (the nbgrader runs' seconds and scores), with the GPU, the date,
  the versions and the grading code it ran (`grading_code`): ``<prefix>-<date>-<time>.json``;
- `write_references_record`: a track's references graded, a row each (`kernel_row`; a model track's
  `model_row`), the ratios ``workshop targets`` reads;
- the GEMM worklog record, ``<track>-<date>-<time>.json`` and its chart (``.png``) in its track's folder: each
  reference kernel's GFLOP/s, ratio to cuBLAS and score, at each size graded. The GEMM GPU tests write it at the
  spec's ``perf_shape``, ``python -m benchmarks.gemm_bench`` adds sizes, launch variants and ncu counts, and
  ``workshop targets`` reads the ratios (`workshop.targets`).
"""
from __future__ import annotations

import ast
import datetime
import hashlib
import json
import os
import platform
import shutil
import time
import tomllib
from importlib import metadata
from pathlib import Path

from graders import tracks
from graders.settings import PACKAGE_ROOT, RESULTS


PLATFORM = "platform"   # the results folder of records that are not one track's: sandbox, fleet, tools


def results_folder(track: str | None) -> Path:
    """Where a record goes: ``benchmarks/results/<track>/``, or ``benchmarks/results/platform/`` without one."""
    return RESULTS / (track or PLATFORM)


def grading_code(root: Path = PACKAGE_ROOT) -> str:
    """A short hash of the code that decides grades: ``graders/**/*.py`` and each track's grader files
    (`graders.tracks.GRADER_FILES`). Equal hashes: a record describes the grading code as it is now."""
    files = sorted(root.glob("graders/**/*.py")) + sorted(
        f for name in tracks.GRADER_FILES for f in root.glob(f"tracks/*/{name}"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def measured_files(track: str, root: Path = PACKAGE_ROOT) -> list[Path]:
    """What a track's measurements depend on: the grader modules its grading child imports (read from their
    import statements, also those inside functions: `_imported`), the track's ``problem.py`` and
    ``solutions/`` (the references measured), its spec, and the ``problem.py`` of every other track whose
    problem kinds the spec names (`_kind_sources`: a Triton softmax is graded on the attention track's kind)."""
    engine = tracks.get(track).engine
    modules = _imported(["graders.sandbox.child", f"graders.{engine}_engine.child"], root)
    folder = root / "tracks" / track
    borrowed = sorted(root / "tracks" / name / "problem.py" for name in _kind_sources(track) if name != track)
    return sorted(modules) + [folder / "problem.py", *sorted(folder.glob("solutions/*.*")), folder / "spec.toml",
                              *borrowed]


def _kind_sources(track: str) -> set[str]:
    """The tracks whose ``problem.py`` defines a kind that ``track``'s spec names (`graders.cuda_engine.problems`:
    the kinds a spec of its engine may name)."""
    from graders.cuda_engine.problems import KIND_SOURCES
    found = tracks.get(track)
    if found.engine not in KIND_SOURCES:
        return set()
    named = {kernel.get("kind") for kernel in tomllib.loads(found.spec_path.read_text()).get("kernel", [])}
    return {source.name for engine in KIND_SOURCES[found.engine] for source, module in tracks.problem_modules(engine)
            if named & {problem.kind for problem in getattr(module, "PROBLEMS", ())}}


def measurement_code(track: str, root: Path = PACKAGE_ROOT) -> str:
    """A short hash of `measured_files`, the spec read as data without the keys a measurement sets (each kernel's
    or model problem's ``target`` and ``floor``, ``targets``, ``measured_in``) or its comments. A record of a
    measurement carries it; equal hashes: the record describes the measuring code as it is now."""
    digest = hashlib.sha256()
    for path in measured_files(track, root):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.name == "spec.toml":
            spec = tomllib.loads(data.decode())
            spec["assignment"] = {k: v for k, v in spec["assignment"].items()
                                  if k not in ("target", "floor", "targets", "measured_in")}
            spec["kernel"] = [{k: v for k, v in kernel.items() if k not in ("target", "floor")}
                              for kernel in spec.get("kernel", [])]
            if "problem" in spec:   # a model track's
                spec["problem"] = [{k: v for k, v in problem.items() if k not in ("target", "floor")}
                                   for problem in spec["problem"]]
            data = json.dumps(spec, sort_keys=True).encode()
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]


def _imported(modules: list[str], root: Path) -> set[Path]:
    """The files of ``modules`` and of every ``graders`` module they import, transitively."""
    found: set[Path] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        path = _module_file(name, root)
        if path is None or path in found:
            continue
        found.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def _module_file(name: str, root: Path) -> Path | None:
    if name.split(".")[0] != "graders":
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def write_gpu_record(prefix: str, what: str, fields: dict, dists: tuple[str, ...] = (),
                     track: str | None = None, folder: str | None = None) -> Path:
    """Write ``<prefix>-<date-time>.json`` into the results folder (`results_folder`) of ``folder``, or else of
    ``track``: ``what``, the GPU, the date, the versions (the grader's, and ``dists``'), the grading code, with
    ``track`` (a measurement of that track's code) its `measurement_code`, then ``fields``. Returns its path."""
    from graders.cuda_engine.timing import versions
    from graders.gpu import detect_gpu
    gpu = detect_gpu()
    found = versions()
    for dist in dists:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    now = datetime.datetime.now(datetime.timezone.utc)
    record = {"what": what, "gpu": gpu.name if gpu else None, "date": now.isoformat(timespec="seconds"),
              "python": platform.python_version(), "versions": found, "grading_code": grading_code(),
              **({"track": track, "measurement_code": measurement_code(track)} if track else {}), **fields}
    where = results_folder(folder or track)
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{prefix}-{now:%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    out = os.environ.get("OUT")
    if out and Path(out).resolve() != where.resolve():
        shutil.copy(path, out)
    print(json.dumps(record, indent=2))
    return path


# --- the GEMM worklog record ---------------------------------------------------------------------------

def label(shape) -> str:
    """A shape as the records name it: ``4096x4096x4096``."""
    return "x".join(map(str, shape))


def gemm_row(result: dict) -> dict:
    """One reference's row from its grading result (`graders.cuda_engine.grade.grade_kernel`, as a dict)."""
    row = {"status": result["status"], "message": result["message"], "score": result["score"],
           "geometry": result.get("geometry"), "seconds": result.get("seconds"),
           "compile": result.get("compile", {}).get("resources")}
    timing = result.get("timing")
    if timing:
        row |= {"gflops": timing["kernel"]["throughput"] / 1e9, "cublas_gflops": timing["baseline"]["throughput"] / 1e9,
                "ratio": timing["ratio"], "suggested_target": round(0.95 * timing["ratio"], 3),
                "kernel_ms": timing["kernel"]["median_s"] * 1e3, "cublas_ms": timing["baseline"]["median_s"] * 1e3,
                "rse": timing["kernel"]["rse"], "samples": timing["kernel"]["samples"], "shape": timing["shape"]}
    if result["status"] != "ok" and result.get("stderr"):
        row["stderr_tail"] = result["stderr"][-1500:]
    return row


def kernel_row(result: dict) -> dict:
    """One reference's row from its grading result (a dict): status, points, the kernel's and its baseline's speed
    and their ``ratio``, which `workshop targets` reads from a record's ``kernels``."""
    row = {"status": result["status"], "message": result["message"], "points": result["points"],
           "max_points": result["max_points"], "seconds": result.get("seconds"),
           "resources": result.get("compile", {}).get("resources"), "sass": result.get("sass"),
           "counter": result.get("counter")}
    timing = result.get("timing")
    if timing:
        scale, unit = (1e12, "TFLOP/s") if timing["work_unit"] == "FLOP" else (1e9, "GB/s")
        row |= {"shape": timing["shape"], "unit": unit, "kernel_ms": timing["kernel"]["median_s"] * 1e3,
                "kernel_rate": timing["kernel"]["throughput"] / scale, "baseline": timing["baseline"]["name"],
                "baseline_ms": timing["baseline"]["median_s"] * 1e3,
                "baseline_rate": timing["baseline"]["throughput"] / scale, "ratio": timing["ratio"],
                "samples": timing["kernel"]["samples"], "rse": timing["kernel"]["rse"]}
    return row


def model_row(result: dict, sizes: dict) -> dict:
    """One model problem's reference row from its grading result (a dict, `graders.model_engine`): its speed-ups,
    and as its ``ratio`` the one over ``torch.compile`` (which its points follow), at the problem's ``sizes``."""
    timing = result.get("timing", {})
    speedup = timing.get("speedup", {})
    row = {"status": result["status"], "message": result["message"], "sizes": sizes, "speedup": speedup,
           "median_ms": {who: timing[who]["median_s"] * 1e3 for who in ("submission", "eager", "compile")
                         if who in timing}}
    return row | ({"ratio": speedup["compile"]} if "compile" in speedup else {})


def write_references_record(track: str, what: str, results: dict[str, dict], rows: dict[str, dict], budget_s: float,
                            *, prefix: str | None = None, dists: tuple[str, ...] = ()) -> Path:
    """A track's references' record (``<prefix or track>-<date-time>.json``, with the track's measuring code): their
    ``rows`` (`kernel_row` of each of ``results``, by kernel id), printed a line a timed kernel, the timing budget
    each grading had and the GPU's environment (the first result's that has one). `workshop targets` reads it."""
    for kid, r in rows.items():
        if "ratio" in r:
            print(f"{kid:20s} {r['kernel_ms']:9.3f} ms {r['kernel_rate']:9.2f} {r['unit']:8s} "
                  f"{r['baseline']} {r['baseline_ms']:.3f} ms ({r['baseline_rate']:.2f}): ratio {r['ratio']:.4f}")
    environment = next((r["environment"] for r in results.values() if r.get("environment")), None)
    return write_gpu_record(prefix or track, what, {"budget_s_per_grading": budget_s, "environment": environment,
                                                    "kernels": rows}, dists=dists, track=track)


def gemm_size_entry(rows: dict[str, dict]) -> dict:
    """The record's entry for one size: the rows by kernel id and the median cuBLAS GFLOP/s among them."""
    cublas = [r["cublas_gflops"] for r in rows.values() if r.get("cublas_gflops")]
    return {"cublas_gflops": sorted(cublas)[len(cublas) // 2] if cublas else None, "kernels": rows}


# the GEMM worklogs (tracks graded as a ratio to cuBLAS at sizes): the warp-tiling step's goal as a fraction
# of cuBLAS, and how their chart names them (`graders.cuda_engine.worklog_chart.plot`)
WORKLOGS = {
    "gemm": {"goal": 0.937, "chart": {"title": "The GEMM worklog", "panel": "SGEMM fp32",
                                      "baseline": "cuBLAS (TF32 off)"}},
    "tensorcores": {"goal": 0.5, "chart": {"title": "The tensor-core worklog",
                                           "panel": "bf16 GEMM (fp16, TF32, fp8: the menu), fp32 accumulate",
                                           "baseline": "cuBLAS in each step's format (fp32 out)"}},
    "hopper": {"goal": 1.0, "chart": {"title": "The Hopper worklog", "panel": "bf16 GEMM, fp32 accumulate (sm_90a)",
                                      "baseline": "cuBLAS bf16 (fp32 out)"}},
    "cutlass": {"goal": 0.95, "chart": {"title": "The CUTLASS rung", "panel": "bf16 and fp16 GEMM in CuTe (sm_90a)",
                                        "baseline": "cuBLAS in each kernel's format (fp32 out)"}},
}


def new_gemm_record(environment: dict | None, track: str = "gemm") -> dict:
    """An empty record of a GEMM worklog (``sizes`` to fill) for the GPU ``environment`` a grading reported."""
    from graders.cuda_engine.spec import load_spec
    from graders.gpu import detect_gpu
    spec = load_spec(track)
    gpu = detect_gpu()
    return {"gpu": (environment or {}).get("gpu") or (gpu.name if gpu else None),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "environment": environment, "grading_code": grading_code(),
            "track": track, "measurement_code": measurement_code(track),
            "targets_in_spec": spec.targets, "graded_shape": label(next(iter(spec.kernels.values())).perf_shape),
            "sizes": {}}


def write_gemm_record(record: dict, out: Path | None, name: str | None = None) -> Path:
    """Write the record and its chart to its track's results folder (and ``out``); returns the JSON's path there."""
    from graders.cuda_engine.worklog_chart import plot
    track = record.get("track", "gemm")
    name = name or f"{track}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for folder in dict.fromkeys(f.resolve() for f in [results_folder(track), *([out] if out else [])]):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(record, indent=2))
        if not record["sizes"]:
            continue
        try:
            plot(record, (folder / name).with_suffix(".png"), **WORKLOGS[track]["chart"])
        except Exception as exc:  # the numbers matter more than the picture
            print(f"chart not drawn: {exc}")
    return results_folder(track) / name


def warptiling_goal_line(size: str, rows: dict, track: str = "gemm") -> str | None:
    """Whether warp tiling reached its worklog's goal at one size (a benchmark's verdict, not a test's)."""
    ratio = rows.get("warptiling", {}).get("ratio")
    if ratio is None:
        return None
    goal = WORKLOGS[track]["goal"]
    verdict = "met" if ratio >= goal else "not met"
    return f"  warp tiling at {size}: {100 * ratio:.1f}% of cuBLAS; the worklog's goal {100 * goal:.1f}%: {verdict}"


def gemm_table(record: dict) -> str:
    """The record as a text table: each size's kernels, the warp-tiling variants, the ncu counts."""
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
        goal = warptiling_goal_line(size, entry["kernels"], record.get("track", "gemm"))
        if goal:
            lines.append(goal)
    for v in record.get("warptiling_variants", []):
        lines.append(f"warptiling block {v['block']} tile {v['tile']} {v['params']} at {v['shape']}: {v['status']}" +
                     (f", {v['gflops']:.0f} GFLOP/s, {100 * v['ratio']:.1f}% of cuBLAS" if "ratio" in v else
                      f" {v['message'][:80]}"))
    ncu = record.get("ncu")
    if ncu:
        counts = ", ".join(f"{k} {_count(v.get('ld'))} / {_count(v.get('st'))}" for k, v in ncu["conflicts"].items()) \
            if "conflicts" in ncu else ncu["skipped"]
        where = f" at {label(ncu['shape'])}" if "shape" in ncu else ""
        lines.append(f"ncu bank conflicts{where} (shared loads / stores): {counts}")
    return "\n".join(lines)


def _count(n) -> str:
    return f"{n:,}" if isinstance(n, int) else "?"
