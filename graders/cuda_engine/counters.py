"""The profiler as a grader: hardware counters, read with Nsight Compute (``ncu``), decide a step's speed points
where the step's lesson is a counter (shared-memory bank conflicts: the padded transpose, the GEMM worklog's
linearized and swizzled steps; instructions executed: causal attention, which must skip the tiles its mask
hides), since speed alone cannot tell those steps apart.

A kernel's spec names the rule (`graders.cuda_engine.spec.CounterRule`): a metric of `METRICS`, the kernel
whose reference is its naive form (``relative_to``), and ``at_most``. `measure` profiles the student's kernel
and that reference, each launched once at the kernel's ``perf_shape`` in a sandboxed child
(`graders.cuda_engine.launch_child`) wrapped in ``ncu`` (only the named kernel is profiled), and says whether
the student's count is at most ``at_most`` x the reference's.

On a GPU worker ncu is required (`ncu_binary`: found by `graders.cuda_engine.sass.find_tool`, ``WORKSHOP_NCU``,
else ``PATH``, else the CUDA toolkit); without it grading stops with `ProfilerMissing`.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

from graders.cuda_engine.sass import find_tool
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec
from graders.gpu import NeedsGPUWorker
from graders.sandbox.run import run_child

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


def count(request: dict, function: str, metric: str, env: dict[str, str]) -> int:
    """``metric`` (a name of `METRICS`) of one launch of ``function``, as the child ``request`` launches it."""
    binary = ncu_binary()
    if binary is None:
        raise ProfilerMissing("Nsight Compute (ncu) was not found on this GPU worker: install it or set WORKSHOP_NCU")
    names = METRICS[metric][0]
    wrapper = (str(binary), "--clock-control", "none", "--metrics", ",".join(names), "--csv", "-k",
               f"regex:^{function}$")
    child = run_child(CHILD, request, timeout_s=TIMEOUT_S, gpu=True, wrapper=wrapper, env=env)
    counts = parse_csv(child.stdout, names)
    row = next((v for k, v in counts.items() if k.split("(")[0] == function), None)
    if not child.ok or row is None or set(row) != set(names):
        raise ProfilingFailed(f"ncu gave no {metric} for {function} ({child.status}: {child.message}) "
                              f"{child.stdout[-500:]}")
    return sum(row.values())


def measure(spec: AssignmentSpec, kernel: KernelSpec, request: dict, env: dict[str, str]) -> dict:
    """The student's count and the ``relative_to`` reference's, both at the kernel's ``perf_shape``, and '' or why
    the rule fails (``failure``). Raises `ProfilerMissing` without ncu, `ProfilingFailed` when it counts nothing."""
    rule = kernel.counter
    naive = spec.kernel(rule.relative_to)
    shape = list(kernel.perf_shape)
    yours = count(request | {"shape": shape}, kernel.function, rule.metric, env)
    reference_request = {"spec_path": request["spec_path"], "kernel_id": naive.id, "shape": shape,
                         "source": naive.reference.read_text(), "seed": request["seed"],
                         "memory_fraction": request.get("memory_fraction", 0.25)}
    theirs = count(reference_request, naive.function, rule.metric, env)
    allowed = rule.at_most * theirs
    what = METRICS[rule.metric][1]
    failure = "" if yours <= allowed else (
        f"its {what} (ncu, one launch at {' x '.join(map(str, shape))}): {yours:,}, against {theirs:,} for the "
        f"reference of step {naive.id}; the speed points need at most {rule.at_most:g} x that ({allowed:,.0f})")
    return {"metric": rule.metric, "ncu_metrics": list(METRICS[rule.metric][0]), "shape": shape, "yours": yours,
            "reference": theirs, "relative_to": naive.id, "at_most": rule.at_most, "failure": failure}
