"""The roofline track's key: never released, never in the student kit or a sandbox (graders/roofline_engine).

WORK: each operation's regime, FLOPs and bytes (each input read once, the output written once; a sequence of
PyTorch operations counts each operation's own). KEY: the reference answers, their times derived from the
reference GPU's figures in spec.toml, the way the notebook teaches: bytes over the memory bandwidth for a
memory-bound operation, FLOPs over the peak its arithmetic runs at for a compute-bound one, its PyTorch operations
times the launch overhead for an overhead-bound one. Those times are checked against a measurement only on the GPU
(tests/gpu/test_roofline_gpu.py).
"""
import tomllib
from pathlib import Path

from graders import tracks

P = tracks.get("roofline").problem_module()
GPU = tomllib.loads((Path(__file__).parent / "spec.toml").read_text())["reference_gpu"]
N = P.ROWS * P.COLS
FP32, BF16 = 4, 2
SECTOR = 32   # bytes: the unit a warp's loads are served in


def memory(nbytes: float) -> float:
    return nbytes / (GPU["hbm_tb_s"] * 1e12) * 1e6


def compute(flops: float, peak: str) -> float:
    return flops / (GPU[f"{peak}_tflops"] * 1e12) * 1e6


def overhead(operations: int) -> float:
    return operations * GPU["launch_overhead_us"]


def work(regime: str, flops: float, nbytes: float, time_us: float) -> dict:
    return {"regime": regime, "flops": flops, "bytes": nbytes, "time_us": time_us}


def matmul(m: int, n: int, k: int, size: int) -> tuple[int, int]:
    """(FLOPs, bytes) of an m x k by k x n matmul: 2mnk; A and B read once, C written once."""
    return 2 * m * n * k, size * (m * k + k * n + m * n)


MATVEC = matmul(P.ROWS, 1, P.COLS, FP32)
OUTER = matmul(P.ROWS, P.COLS, P.THIN, BF16)
SQUARE_FP32 = matmul(P.SQUARE, P.SQUARE, P.SQUARE, FP32)
SQUARE_BF16 = matmul(P.SQUARE, P.SQUARE, P.SQUARE, BF16)
# x.t().contiguous(): every fp32 element it reads lies 32 KiB from its neighbour's, so each 32-byte sector serves
# 4 bytes: its reads cost SECTOR / FP32 = 8 times their bytes. Then the sum reads the copy and writes 8192 sums.
TRANSPOSE_BYTES = FP32 * N + FP32 * N + FP32 * N + FP32 * P.ROWS
TRANSPOSE_MOVED = SECTOR * N + FP32 * N + FP32 * N + FP32 * P.ROWS

WORK = {
    "add_small": work("overhead", P.SMALL, 3 * FP32 * P.SMALL, overhead(1)),
    "add_huge": work("memory", P.ADD, 3 * FP32 * P.ADD, memory(3 * FP32 * P.ADD)),
    "sum_small": work("overhead", P.SMALL, FP32 * P.SMALL + FP32, overhead(1)),
    "sum_huge": work("memory", P.SUM, FP32 * P.SUM + FP32, memory(FP32 * P.SUM + FP32)),
    "matvec": work("memory", *MATVEC, memory(MATVEC[1])),
    "matmul_outer": work("memory", *OUTER, memory(OUTER[1])),
    "matmul_fp32": work("compute", *SQUARE_FP32, compute(SQUARE_FP32[0], "fp32")),
    "matmul_bf16": work("compute", *SQUARE_BF16, compute(SQUARE_BF16[0], "bf16")),
    "softmax": work("memory", 5 * N, 2 * FP32 * N, memory(2 * FP32 * N)),
    "layer_norm": work("memory", 8 * N, 2 * FP32 * N + 2 * FP32 * P.COLS, memory(2 * FP32 * N + 2 * FP32 * P.COLS)),
    "chain": work("overhead", 2 * P.CHAIN * P.SMALL, 2 * P.CHAIN * 2 * FP32 * P.SMALL, overhead(2 * P.CHAIN)),
    "transpose_sum": work("memory", N, TRANSPOSE_BYTES, memory(TRANSPOSE_MOVED)),
}


def _sig(value: float) -> float:
    return float(f"{value:.4g}")


KEY = {op: {"regime": w["regime"], "intensity": _sig(w["flops"] / w["bytes"]), "time_us": _sig(w["time_us"])}
       for op, w in WORK.items()}
