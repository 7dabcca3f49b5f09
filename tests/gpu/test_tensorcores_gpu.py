"""The tensor-core worklog graded on a real GPU: every reference and every known-wrong solution.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_tensorcores_gpu.py -x -q -s`` (``-s`` shows
the table). Each grading runs in its own child process, cuBLAS in the kernel's format (fp32 out) timed in the
same child. The references' TFLOP/s, ratio to cuBLAS, format and largest relative error at the spec's 4096^3
are printed and written to ``benchmarks/results/tensorcores/tensorcores-<date-time>.json`` (and ``$OUT``), a record
``workshop targets tensorcores`` reads (``sizes.4096x4096x4096.kernels.<id>.ratio``), with the worklog's chart
(``.png``: TFLOP/s per step against cuBLAS).
"""
import json
import os
import shutil

import pytest

from graders import tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.worklog_chart import plot
from workshop import records

pytestmark = pytest.mark.gpu

SPEC = load_spec("tensorcores")
BUDGET_S = float(os.environ.get("TENSORCORES_TEST_BUDGET_S", "2.0"))   # per grading here
WRONG = tracks.get("tensorcores").wrong_solutions()
CHAINS = 8
# back-to-back mma.sync.m16n8k16 (bf16 in, fp32 accumulate) from registers, no memory traffic in the loop;
# CHAINS independent accumulators a warp, so that each instruction's latency is hidden by the others
MMA_CEILING = r"""
#define CHAINS 8
extern "C" __global__ void mma_ceiling(float* out, int iterations)
{
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = 0x3f803f80u ^ (threadIdx.x * 2654435761u >> (8 * i)) & 0x00010001u;
    b[0] = a[1]; b[1] = a[2];
    float acc[CHAINS][4] = {};
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float sum = 0.0f;
    for (int c = 0; c < CHAINS; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
"""


def grade(kernel_id: str, source: str) -> dict:
    result = grade_kernel("tensorcores", kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result))
    return result.as_dict()


def table(rows: dict) -> str:
    lines = [f"{'step':<12}{'status':<10}{'TFLOP/s':>9}{'cuBLAS':>9}{'% cuBLAS':>10}{'mma.sync':>10}{'% mma':>8}"
             f"{'points':>8}{'max rel err':>13}  format"]
    for kid, r in rows.items():
        if "ratio" in r:
            probe = r["mma_ceiling_gflops"]
            lines.append(f"{kid:<12}{r['status']:<10}{r['gflops'] / 1e3:>9.1f}{r['cublas_gflops'] / 1e3:>9.1f}"
                         f"{100 * r['ratio']:>9.1f}%{(probe or 0) / 1e3:>10.1f}"
                         f"{100 * r['gflops'] / probe if probe else 0:>7.1f}%{r['score']['total']:>8.2f}"
                         f"{r['max_rel_error'] or 0:>13.2g}  {r['precision']}")
        else:
            lines.append(f"{kid:<12}{r['status']:<10}  {r['message'][:90]}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def rows() -> dict:
    found = {}
    environment = None
    for kid, kernel in SPEC.kernels.items():
        result = grade(kid, kernel.reference.read_text())
        probe = result.get("timing", {}).get("instruction_ceiling") or {}
        found[kid] = records.gemm_row(result) | {"precision": result.get("precision"), "max_rel_error": max(
            (c["accuracy"]["max_rel_error"] for c in result.get("checks", []) if "accuracy" in c), default=None),
            "mma_ceiling": probe.get("name"), "mma_ceiling_gflops": probe["throughput"] / 1e9 if probe else None}
        environment = environment or result.get("environment")
    shape = records.label(SPEC.kernel("warptiling").perf_shape)
    fields = {"environment": environment, "targets_in_spec": SPEC.targets, "graded_shape": shape,
              "sizes": {shape: records.gemm_size_entry(found)}}
    path = records.write_gpu_record("tensorcores", "the tensor-core worklog's references graded at the spec's "
                                    "shape", fields, track="tensorcores")
    chart = plot(json.loads(path.read_text()), path.with_suffix(".png"), **records.WORKLOGS["tensorcores"]["chart"])
    if os.environ.get("OUT"):
        shutil.copy(chart, os.environ["OUT"])
    print(f"\n{shape}, bf16 in (fp16, fp32 as TF32, e4m3 in the menu's steps), fp32 accumulate and out\n" + table(found)
          + f"\nwrote {path} and {chart.name}")
    return found


def test_every_reference_is_correct_with_full_correctness_points(rows):
    for kid, row in rows.items():
        assert row["status"] == "ok", f"{kid}: {row['message']} {row.get('stderr_tail', '')}"
        assert row["score"]["correctness"] == SPEC.kernel(kid).points_correct
        assert row["precision"] and row["max_rel_error"] is not None   # what the feedback's precision table shows


def test_the_best_reference_against_the_issue_goal(rows):
    """Reported, not asserted beyond sanity: the issue's goal is 50% of cuBLAS bf16 at 4096^3."""
    best = max(rows, key=lambda kid: rows[kid].get("ratio", 0))
    print(f"\nbest: {best} at {100 * rows[best]['ratio']:.1f}% of cuBLAS (goal 50%)")
    assert rows[best]["ratio"] > rows["wmma"]["ratio"]


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_solution_gets_its_expected_status_and_points(path):
    kid = tracks.graded_kernel(path)
    result = grade(kid, path.read_text())
    timing = result.get("timing")
    if timing:
        print(f"{path.stem}: {timing['kernel']['throughput'] / 1e12:.1f} TFLOP/s, {100 * timing['ratio']:.1f}% of "
              f"cuBLAS")
    problem = tracks.unmet_expectation(path, result["status"], result["score"]["total"])
    assert not problem, f"{problem}: {result['message']}"


def mma_sync_ceiling() -> dict:
    """The GPU's mma.sync m16n8k16 bf16 rate: `MMA_CEILING` on every SM (32 warps each), median of 5 launches
    after one warm-up, timed with CUDA events on the kernel's stream."""
    import numpy as np
    import torch
    try:
        from cuda.core import Device, LaunchConfig, launch
    except ImportError:  # cuda.core before 0.4
        from cuda.core.experimental import Device, LaunchConfig, launch

    from graders.cuda_engine.compile import compile_cuda
    torch.cuda.init()
    device = Device(0)
    device.set_current()
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    kernel = compile_cuda(MMA_CEILING, kernels=("mma_ceiling",), arch=arch).object_code.get_kernel("mma_ceiling")
    stream = device.create_stream()
    blocks, threads, iterations = torch.cuda.get_device_properties(0).multi_processor_count * 4, 256, 512
    out = torch.empty(blocks * threads, device="cuda")
    config = LaunchConfig(grid=(blocks, 1, 1), block=(threads, 1, 1))
    seconds = []
    with torch.cuda.stream(torch.cuda.ExternalStream(int(stream.handle))):
        for _ in range(6):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch(stream, config, kernel, np.uint64(out.data_ptr()), np.int32(iterations))
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
    median = sorted(seconds[1:])[len(seconds[1:]) // 2]
    flops = blocks * threads // 32 * iterations * CHAINS * 2 * 16 * 8 * 16
    return {"flops_per_s": flops / median, "median_s": median, "blocks": blocks, "threads": threads,
            "iterations": iterations, "chains": CHAINS, "arch": arch}


def test_references_against_the_mma_sync_ceiling(rows):
    """Reported: each reference's TFLOP/s as a share of mma.sync's own rate on this GPU (the issue's second
    way of reporting speed; the score is the ratio to cuBLAS). Every grading measured its format's probe in its
    child (`Problem.instruction_probe`); the bf16 steps' probes agree with this test's own bf16 microbenchmark
    within 15%, and no reference runs above its format's probe."""
    ceiling = mma_sync_ceiling()
    share = {kid: r["gflops"] * 1e9 / ceiling["flops_per_s"] for kid, r in rows.items()
             if "gflops" in r and SPEC.kernel(kid).kind == "bf16gemm"}   # the ceiling is bf16's
    in_child = {kid: r["mma_ceiling_gflops"] * 1e9 for kid, r in rows.items() if r.get("mma_ceiling_gflops")}
    records.write_gpu_record("tensorcores-mma-ceiling", "back-to-back mma.sync m16n8k16 bf16 and each tensor-core "
                             "reference's share of it; each grading child's probe of its format",
                             {"ceiling": ceiling, "share": share, "in_child": in_child}, folder="tensorcores")
    print(f"\nmma.sync ceiling: {ceiling['flops_per_s'] / 1e12:.0f} TFLOP/s; " +
          ", ".join(f"{kid} {100 * v:.1f}%" for kid, v in share.items()) + "\nin each child: " +
          ", ".join(f"{kid} {v / 1e12:.0f}" for kid, v in in_child.items()))
    assert ceiling["flops_per_s"] > 0 and share
    assert sorted(in_child) == sorted(k for k, r in rows.items() if "gflops" in r)
    for kid in share:
        assert abs(in_child[kid] / ceiling["flops_per_s"] - 1) < 0.15, (kid, in_child[kid], ceiling)
    for kid, r in rows.items():
        if kid in in_child:
            assert r["gflops"] * 1e9 <= 1.05 * in_child[kid], (kid, r["gflops"], in_child[kid])


@pytest.mark.parametrize("kind", ["bf16gemm", "f16gemm", "tf32gemm", "fp8gemm"])
def test_each_baseline_computes_the_product_of_its_inputs(kind):
    """The cuBLAS call each kind is timed against multiplies the same matrices as the kernels (a layout mistake,
    fp8's column-major B read as row-major say, gives an error of order 1); its own error is printed, not held
    to the kernels' tolerance (cuBLAS may accumulate fp8 products in a lower precision than fp32)."""
    import torch

    from graders.cuda_engine.problems import problem
    definition = problem(kind)
    inputs = definition.make_inputs((256, 384, 512), torch.Generator(device="cuda").manual_seed(0))
    out = torch.full((256, 384), float("nan"), device="cuda")
    definition.baseline(out, inputs)
    torch.cuda.synchronize()
    measured = definition.accuracy(out, definition.reference(inputs))
    print(f"\n{kind}, {definition.baseline_name}: max relative error {measured['max_rel_error']:.2g}, relative "
          f"Frobenius error {measured['frobenius_rel_error']:.2g}")
    assert measured["frobenius_rel_error"] < 1e-2
