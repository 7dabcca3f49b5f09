"""Which Nsight Compute metrics tell a step's lesson apart on this GPU (a benchmark run on a GPU worker).

A counter rule (`graders.cuda_engine.counters`) names ncu metrics, and ncu answers ``n/a`` for a metric the GPU
does not collect, or refuses a name it does not know. Before a spec relies on one, this profiles each named
reference (and known-wrong solution) of a track once, in the grading child under ncu as a rule would, with every
candidate metric that ``ncu --query-metrics`` lists, and prints the values side by side:

    python3 -m benchmarks.counter_probe --track tensorcores --kernels mma,swizzle --wrong unswizzled \\
        --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum,...

The record goes to ``benchmarks/results/<track>/counter-probe-<track>-<date-time>.json``.
"""
from __future__ import annotations

import argparse
import subprocess

from graders import tracks
from graders.cuda_engine import counters
from graders.cuda_engine.grade import _child_env
from graders.cuda_engine.sass import find_tool
from graders.cuda_engine.spec import load_spec
from graders.sandbox.run import run_child
from workshop.records import write_gpu_record


def known_metrics(ncu: str, candidates: list[str]) -> list[str]:
    """The candidates whose base name (before ``.sum`` and the like) ``ncu --query-metrics`` lists."""
    listing = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    names = {line.split()[0] for line in listing.splitlines() if line.strip()}
    return [m for m in candidates if m.rsplit(".", 1)[0] in names]


def profile(ncu: str, spec, kernel_id: str, source: str, metrics: list[str]) -> dict[str, str]:
    """ncu's value of each metric for one launch of the kernel at its ``perf_shape``, as ncu wrote it."""
    kernel = spec.kernel(kernel_id)
    request = {"spec_path": str(spec.path.resolve()), "kernel_id": kernel_id, "shape": list(kernel.perf_shape),
               "source": source, "seed": 0, "memory_fraction": 0.25}
    wrapper = (ncu, "--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "-k",
               f"regex:^{kernel.function}$")
    child = run_child(counters.CHILD, request, timeout_s=counters.TIMEOUT_S, gpu=True, wrapper=wrapper,
                      env=_child_env())
    found = counters.raw_values(child.stdout, metrics)
    row = next((v for k, v in found.items() if k.split("(")[0] == kernel.function), {})
    if not row:
        row = {"error": f"{child.status}: {child.message} {child.stdout[-300:]}"}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--track", required=True)
    parser.add_argument("--kernels", default="", help="references to profile, comma-separated")
    parser.add_argument("--wrong", default="", help="known-wrong solutions (file stems), comma-separated")
    parser.add_argument("--metrics", required=True, help="candidate ncu metrics, comma-separated")
    args = parser.parse_args()
    ncu = find_tool("ncu")
    if ncu is None:
        raise SystemExit("ncu not found")
    spec = load_spec(args.track)
    candidates = args.metrics.split(",")
    metrics = known_metrics(str(ncu), candidates)
    print(f"ncu {ncu}; unknown to it: {sorted(set(candidates) - set(metrics)) or 'none'}")
    runs = [(kid, kid, spec.kernel(kid).reference.read_text()) for kid in filter(None, args.kernels.split(","))]
    wrong = {p.stem: p for p in tracks.get(args.track).wrong_solutions()}
    runs += [(f"wrong/{stem}", tracks.graded_kernel(wrong[stem]), wrong[stem].read_text())
             for stem in filter(None, args.wrong.split(","))]
    rows = {label: profile(str(ncu), spec, kid, source, metrics) for label, kid, source in runs}
    for metric in metrics:
        print(metric + ": " + ", ".join(f"{label} {row.get(metric, row.get('error', '-'))}"
                                        for label, row in rows.items()))
    for label, row in rows.items():
        if "error" in row:
            print(f"{label}: {row['error']}")
    path = write_gpu_record(f"counter-probe-{args.track}", "ncu's value of candidate metrics for one launch of "
                            "each kernel at its perf_shape, as a counter rule profiles it",
                            {"track": args.track, "unknown_metrics": sorted(set(candidates) - set(metrics)),
                             "rows": rows}, track=args.track)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
