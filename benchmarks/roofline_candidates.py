"""Candidate operations for the roofline track (L1), timed as its grading child times the track's own
(`graders.roofline_engine.child.EagerTimer`: L2 flushed, from an idle GPU, medians), each beside the memory
speed-of-light time the key would give it on this GPU (bytes over the bandwidth read off its clocks): which
PyTorch operations, at which shapes, come within 2x of their roof, and what one launch costs alone and in a chain.

Run on a GPU worker: ``python -m benchmarks.roofline_candidates [--budget-s 30]``. Prints a table and writes
``roofline-candidates-<date>.json`` under benchmarks/results/roofline/.
"""
from __future__ import annotations

import argparse

from graders import tracks
from graders.cuda_engine.timing import environment
from graders.roofline_engine.child import LAUNCH, EagerTimer, subjects
from graders.roofline_engine.operations import Operation, Tensor
from workshop.records import write_gpu_record

P = tracks.get("roofline").problem_module()
FP32, BF16 = 4, 2
ROWS_COLS = [(8192, 8192), (16384, 4096), (32768, 2048), (65536, 1024)]   # the track's old shape first
CHAINS = (10, 50)   # rounds of the chain (two operations each): their difference is a launch's cost in a stream


def _rows(prefix: str, code: str, extra: tuple[str, ...], row_bytes: int) -> list[tuple[Operation, int]]:
    """``code`` over an fp32 x of each of `ROWS_COLS` (and ``extra`` fp32 inputs of its width): (operation, bytes
    moved)."""
    found = []
    for rows, cols in ROWS_COLS:
        inputs = {"x": Tensor((rows, cols))} | {name: Tensor((cols,)) for name in extra}
        found.append((Operation(f"{prefix}_{rows}x{cols}", prefix, code.format(cols=cols), inputs),
                      row_bytes * rows * cols + FP32 * cols * len(extra)))
    return found


def candidates() -> list[tuple[Operation, int]]:
    """(operation, bytes it must move at least: each input read once, the output written once)."""
    found = _rows("softmax", "y = torch.softmax(x, dim=-1)", (), 2 * FP32)
    found += _rows("layer_norm", "y = F.layer_norm(x, ({cols},), w, b)", ("w", "b"), 2 * FP32)
    for n, k in [(8192, 8192), (16384, 16384)]:
        found.append((Operation(f"matvec_fp32_{n}x{k}", "matvec", "y = W @ v",
                                {"W": Tensor((n, k)), "v": Tensor((k,))}), FP32 * (n * k + n + k)))
    for n, k in [(28672, 8192), (8192, 8192)]:
        found.append((Operation(f"linear_bf16_{n}x{k}", "matvec", "y = F.linear(v, W)",
                                {"v": Tensor((1, k), "bf16"), "W": Tensor((n, k), "bf16")}, peak="bf16"),
                      BF16 * (n * k + n + k)))
    for m, k in [(8192, 64), (16384, 64), (8192, 256)]:
        found.append((Operation(f"outer_bf16_{m}x{k}x{m}", "outer", "C = A @ B",
                                {"A": Tensor((m, k), "bf16"), "B": Tensor((k, m), "bf16")}, peak="bf16"),
                      BF16 * (2 * m * k + m * m)))
    for rounds in CHAINS:
        found.append((Operation(f"chain_{rounds}", "chain", P.chain_code(rounds), {"x": Tensor((P.SMALL,))},
                                operations=2 * rounds), 2 * rounds * 2 * FP32 * P.SMALL))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=30.0, help="seconds of sampling for every candidate")
    args = parser.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    found = candidates()
    stats = EagerTimer(subjects([op for op, _ in found], torch)).measure(args.budget_s, min_samples=50,
                                                                        min_time_s=2.0)
    env = environment()
    bandwidth = env["peaks"]["dram"]
    rows = {}
    print(f"{env['gpu']}: memory bandwidth {bandwidth / 1e12:.2f} TB/s from its clocks; one launch alone "
          f"{stats[LAUNCH].median_s * 1e6:.1f} µs")
    print(f"{'candidate':>26} {'measured µs':>12} {'bytes/bw µs':>12} {'measured / roof':>16}")
    for op, nbytes in found:
        measured, roof = stats[op.id].median_s, nbytes / bandwidth
        rows[op.id] = {"code": op.code, "bytes": nbytes, "median_us": measured * 1e6, "roof_us": roof * 1e6,
                       "samples": stats[op.id].samples}
        print(f"{op.id:>26} {measured * 1e6:12.1f} {roof * 1e6:12.1f} {measured / roof:16.2f}")
    chains = [stats[f"chain_{n}"].median_s for n in CHAINS]
    in_stream = (chains[1] - chains[0]) / (2 * (CHAINS[1] - CHAINS[0]))
    print(f"a launch in a stream of them: {in_stream * 1e6:.1f} µs")
    write_gpu_record("roofline-candidates", "candidate operations for the roofline track, timed as its grading "
                     "child times them, against bytes over the bandwidth",
                     {"launch_alone_us": stats[LAUNCH].median_s * 1e6, "launch_in_stream_us": in_stream * 1e6,
                      "bandwidth": bandwidth, "candidates": rows, "environment": env}, folder="roofline")


if __name__ == "__main__":
    main()
