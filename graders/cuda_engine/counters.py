"""The profiler as a grader: hardware counters, read with Nsight Compute (``ncu``), decide a step's speed points
where the step's lesson is a counter (shared-memory bank conflicts: the padded transpose, the GEMM worklog's
linearized and swizzled steps; instructions executed: causal attention, which must skip the tiles its mask
hides), since speed alone cannot tell those steps apart.

A kernel's spec names the rule (`graders.cuda_engine.spec.CounterRule`): a metric of `METRICS`, the kernel
whose reference is its naive form (``relative_to``), and ``at_most``. `measure` profiles the student's kernel
launched once at the kernel's ``perf_shape`` in a sandboxed child (`graders.cuda_engine.launch_child`) wrapped in
``ncu`` (only the named kernel is profiled), takes the reference's count at the same shape (`reference_count`),
and gives the share of the speed points the rule leaves (`graders.cuda_engine.scoring.counter_share`: all at most
``at_most`` x the reference's count, none at or above it, a log scale between); `scale_lines` shows the student
where their count sits on that scale.

The reference's count depends on nothing a submission brings (its inputs come from a fixed seed,
`REFERENCE_SEED`), so the worker keeps the counts it measured, in the process and on its disk (`counts_cache`:
each submission is graded by an nbgrader process of its own): a worker profiles a reference once and then only
the students' kernels. The key is everything the count depends on: the GPU's name, the ncu program, the code a
profiled launch runs (`measuring_code`) and the compiler and libraries it runs with, the spec's file and the
reference kernel's id, kind, function and geometry, the hash of the reference's source, the metric and the
shape. A failed count is never kept.

On a GPU worker ncu is required (`ncu_binary`: found by `graders.cuda_engine.sass.find_tool`, ``WORKSHOP_NCU``,
else ``PATH``, else the CUDA toolkit); without it grading stops with `ProfilerMissing`.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import threading
import time
from pathlib import Path

from graders import settings
from graders.cuda_engine.sass import find_tool
from graders.cuda_engine.scoring import counter_share
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec
from graders.gpu import NeedsGPUWorker, detect_gpu
from graders.sandbox.run import run_child
from graders.sandbox.starvation import refuse_starved
from graders.worker_cache import worker_folder

NSIGHT_COMPUTE_HOME = "/opt/nvidia/nsight-compute"   # one folder per version

# a counter's name in specs: the ncu metrics summed for it, and what it is called in messages
METRICS = {
    # loads include ldmatrix's: ncu on the H200 counts them here (its per-ldmatrix metrics are n/a or unknown)
    "shared_bank_conflicts": (("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
                              "shared-memory bank conflicts"),
    # work done rather than time taken, for a step whose lesson is work skipped (causal attention's masked tiles)
    "fp32_instructions": (("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
                           "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
                           "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"),
                          "FP32 instructions (FADD, FMUL, FFMA, counted per thread)"),
    "tensor_instructions": (("sm__inst_executed_pipe_tensor_op_hmma.sum",), "tensor-core instructions (HMMA)"),
}
CHILD = "graders.cuda_engine.launch_child"
TIMEOUT_S = 180.0
REFERENCE_SEED = 0   # the reference's inputs: fixed, so its count depends on nothing the submission brings

_reference_counts: dict[tuple, int] = {}   # `reference_count`'s successful counts, for this process's life
_PROFILING = threading.Lock()   # held while an ncu child runs (`count`)


class ProfilerMissing(NeedsGPUWorker):
    """This GPU worker has no Nsight Compute: it cannot grade counter rules."""


class ProfilingFailed(RuntimeError):
    """ncu gave no count: the grader's problem, not the kernel's."""


def raw_values(text: str, metrics) -> dict[str, dict[str, str]]:
    """Kernel name -> metric -> value as ncu wrote it, from ``ncu --csv`` output (its ==PROF== lines and others
    skipped).

    Raises `ProfilingFailed` when a kernel's metric appears twice: each kernel is launched once, so a second
    row is text the kernel printed itself (device ``printf`` shares ncu's output) posing as ncu's."""
    found: dict[str, dict[str, str]] = {}
    for row in csv.DictReader(line for line in text.splitlines() if line.startswith('"')):
        if row.get("Metric Name") in metrics:
            values = found.setdefault(row["Kernel Name"], {})
            if row["Metric Name"] in values:
                raise ProfilingFailed(f"ncu's output has {row['Metric Name']} of {row['Kernel Name']} twice")
            values[row["Metric Name"]] = row["Metric Value"]
    return found


def parse_csv(text: str, metrics) -> dict[str, dict[str, int]]:
    """`raw_values` as counts. Raises `ProfilingFailed` for a value that is not a number: ncu writes ``n/a`` for
    a metric this GPU does not collect."""
    counts: dict[str, dict[str, int]] = {}
    for kernel, values in raw_values(text, metrics).items():
        for name, value in values.items():
            try:
                counts.setdefault(kernel, {})[name] = int(float(value.replace(",", "")))
            except ValueError:
                raise ProfilingFailed(f"ncu gave {value!r} for {name} of {kernel}: this GPU does not count it")
    return counts


def ncu_binary() -> Path | None:
    """Nsight Compute's own ``ncu``: where the one found is the CUDA toolkit's launcher script (``bin/ncu`` runs the
    ncu installed beside the toolkit or under /opt/nvidia), the program it runs. A sandbox shows the folder of the
    program a child runs under, so it must be the program, not a script that looks elsewhere."""
    found = find_tool("ncu")
    if found is None:
        return None
    try:
        with open(found, "rb") as f:
            if f.read(2) != b"#!":
                return found
    except OSError:
        return found
    toolkit = found.resolve().parent.parent
    candidates = [*sorted(Path(NSIGHT_COMPUTE_HOME).glob("*/ncu")),
                  *sorted(toolkit.glob("nsight-compute*/ncu"))]   # last: the toolkit's own, newest
    programs = [c for c in candidates if c.is_file() and os.access(c, os.X_OK)]
    return programs[-1] if programs else found


def count(request: dict, function: str, metric: str, env: dict[str, str], timeout_s: float = TIMEOUT_S) -> int:
    """``metric`` (a name of `METRICS`) of one launch of ``function``, as the child ``request`` launches it. One
    ncu at a time in this process (`_PROFILING`): a GPU's counters serve one profiling process at a time, and a
    sandboxed ncu cannot see another's lock file."""
    binary = ncu_binary()
    if binary is None:
        raise ProfilerMissing("Nsight Compute (ncu) was not found on this GPU worker: install it or set WORKSHOP_NCU")
    names = METRICS[metric][0]
    wrapper = (str(binary), "--clock-control", "none", "--metrics", ",".join(names), "--csv", "-k",
               f"regex:^{function}$")
    with _PROFILING:
        child = run_child(CHILD, request, timeout_s=timeout_s, gpu=True, wrapper=wrapper, env=env)
    refuse_starved(child, timeout_s)
    counts = parse_csv(child.stdout, names)
    row = next((v for k, v in counts.items() if k.split("(")[0] == function), None)
    if not child.ok or row is None or set(row) != set(names):
        raise ProfilingFailed(f"ncu gave no {metric} for {function} ({child.status}: {child.message}) "
                              f"{child.stdout[-500:]}")
    return sum(row.values())


def measuring_code() -> str:
    """A hash of the code a profiled launch runs: the grader package and every track's ``problem.py``."""
    digest = hashlib.sha256()
    files = [*sorted(settings.PACKAGE_ROOT.glob("graders/**/*.py")), *sorted(settings.TRACKS.glob("*/problem.py"))]
    for path in files:
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def reference_count(request: dict, naive: KernelSpec, shape: list[int], metric: str,
                    env: dict[str, str], timeout_s: float = TIMEOUT_S) -> tuple[int, bool]:
    """(``metric`` of one launch of ``naive``'s reference at ``shape``, whether this worker had counted it
    already), launched as the student's ``request`` names the spec and caps the GPU memory, on `REFERENCE_SEED`'s
    inputs: profiled once per worker and key (see the module's docstring), then kept."""
    from graders.cuda_engine.timing import versions   # imported here: the compiler's, read once per key
    source = naive.reference.read_text()
    gpu = detect_gpu()
    key = (gpu.name if gpu else None, str(ncu_binary()), measuring_code(), request["spec_path"], naive.id,
           naive.kind, naive.function, naive.geometry, hashlib.sha256(source.encode()).hexdigest(), metric,
           tuple(shape))
    if key in _reference_counts:
        return _reference_counts[key], True
    kept_as = repr((key, versions()))
    stored = _stored_count(kept_as)
    if stored is not None:
        _reference_counts[key] = stored
        return stored, True
    reference_request = {"spec_path": request["spec_path"], "kernel_id": naive.id, "shape": list(shape),
                         "source": source, "seed": REFERENCE_SEED,
                         "memory_fraction": request.get("memory_fraction", 0.25)}
    _reference_counts[key] = counted = count(reference_request, naive.function, metric, env, timeout_s)
    _store_count(kept_as, counted)
    return counted, False


def counts_cache() -> Path:
    """Where a worker keeps the references' counts across its processes: ``WORKSHOP_COUNTS_CACHE``, else
    ``~/.cache/kernel-workshop/reference-counts`` (`graders.worker_cache.worker_folder`); out of every sandbox's
    sight."""
    return worker_folder("WORKSHOP_COUNTS_CACHE", "reference-counts")


def _count_file(key: str) -> Path:
    return counts_cache() / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def _stored_count(key: str) -> int | None:
    """The count kept under ``key`` (its whole text stored beside it, and compared), or None."""
    try:
        kept = json.loads(_count_file(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key or type(kept.get("count")) is not int:
        return None
    return kept["count"]


def _store_count(key: str, counted: int) -> None:
    """Keeps ``counted`` under ``key``, the file written aside and renamed into place; a worker that cannot write
    there counts again next time."""
    path = _count_file(key)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text(json.dumps({"key": key, "count": counted}))
        os.replace(scratch, path)
    except OSError:
        with contextlib.suppress(OSError):
            scratch.unlink()


def measure(spec: AssignmentSpec, kernel: KernelSpec, request: dict, env: dict[str, str],
            timeout_s: float = TIMEOUT_S) -> dict:
    """The student's count and the ``relative_to`` reference's, both at the kernel's ``perf_shape``, the share of
    the speed points they leave (``share``), the seconds of each count (``seconds``: the reference's is about 0 where
    it was kept), and '' or why that is less than all of them (``failure``). Raises
    `ProfilerMissing` without ncu, `ProfilingFailed` when it counts nothing."""
    rule = kernel.counter
    naive = spec.kernel(rule.relative_to)
    shape = list(kernel.perf_shape)
    started = time.monotonic()
    yours = count(request | {"shape": shape}, kernel.function, rule.metric, env, timeout_s)
    counted = time.monotonic()
    theirs, cached = reference_count(request, naive, shape, rule.metric, env, timeout_s)
    seconds = {"yours": round(counted - started, 3), "reference": round(time.monotonic() - counted, 3)}
    measured = {"metric": rule.metric, "ncu_metrics": list(METRICS[rule.metric][0]), "shape": shape,
                "yours": yours, "reference": theirs, "reference_cached": cached, "relative_to": naive.id,
                "at_most": rule.at_most, "share": counter_share(yours, theirs, rule.at_most), "seconds": seconds}
    return measured | {"failure": "" if measured["share"] == 1 else (
        f"its {METRICS[rule.metric][1]} (ncu, one launch at {_shape(shape)}): {yours:,}, against {theirs:,} for "
        f"the reference of step {naive.id}; all the speed points need at most {rule.at_most:g} x that "
        f"({rule.at_most * theirs:,.0f}), {1 / rule.at_most:.3g}x fewer; its count is {_compared(yours, theirs)}, "
        f"so they are multiplied by {measured['share']:g}{_log(measured)}")}


def scale_lines(measured: dict) -> list[str]:
    """Two lines for the student: the counts and the bound, then where the count sits on the rule's scale and the
    factor its speed points are multiplied by."""
    yours, theirs, at_most = measured["yours"], measured["reference"], measured["at_most"]
    return [f"{METRICS[measured['metric']][1]} (ncu, one launch at {_shape(measured['shape'])}): yours {yours:,}; "
            f"the reference of {measured['relative_to']} {theirs:,}; the bound {at_most:g} x that, "
            f"{at_most * theirs:,.0f}",
            f"on a log scale from as many as the reference's (speed points x 0) to {1 / at_most:.3g}x fewer (x 1), "
            f"yours is {_compared(yours, theirs)}: speed points x {measured['share']:g}{_log(measured)}"]


def _shape(shape) -> str:
    return " x ".join(map(str, shape))


def _compared(yours: int, theirs: int) -> str:
    """``yours`` against ``theirs``: "7.69x fewer than the reference's", "1.04x more than ...", "0"."""
    if yours == theirs:
        return "equal to the reference's"
    if yours == 0 or theirs == 0:
        return f"{yours:,}"
    if yours < theirs:
        return f"{_factor(theirs / yours)} fewer than the reference's"
    return f"{_factor(yours / theirs)} more than the reference's"


def _factor(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:,.0f}x"


def _log(measured: dict) -> str:
    """How a share between 0 and 1 was reached; '' for 0 and 1."""
    if measured["share"] in (0, 1):
        return ""
    return (f" (log {measured['reference'] / measured['yours']:.2f} / log {1 / measured['at_most']:.3g}, in whole "
            "hundredths)")
