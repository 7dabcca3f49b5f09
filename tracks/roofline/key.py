"""The roofline track's key: never released, never in the student kit or a sandbox (graders/roofline_engine).

WORK: each operation's regime, FLOPs and bytes (each input read once, the output written once; a sequence of
PyTorch operations counts each operation's own). KEY: the reference answers, their times derived from the
reference GPU's figures in spec.toml, the way the notebook teaches (`model`): bytes over the memory bandwidth for a
memory-bound operation, FLOPs over the peak its arithmetic runs at for a compute-bound one, and for an
overhead-bound one the launch of one operation alone plus each further one's in a stream of launches. Those times
are checked against a measurement only on the GPU (tests/gpu/test_roofline_gpu.py), where `model` evaluated with
the worker's own figures (`figures`) is what is compared. The grader translates a worker's measurement to the
reference GPU with the same two: times `model`'s time on the reference GPU over its time on the worker's figures
(graders/roofline_engine/grade.py, `translation`).
"""
import math
import tomllib
from pathlib import Path

from graders import tracks

P = tracks.get("roofline").problem_module()
GPU = tomllib.loads((Path(__file__).parent / "spec.toml").read_text())["reference_gpu"]
FP32, BF16 = 4, 2
SECTOR = 32   # bytes: the unit a warp's loads are served in


def matmul(m: int, n: int, k: int, size: int) -> tuple[int, int]:
    """(FLOPs, bytes) of an m x k by k x n matmul: 2mnk; A and B read once, C written once."""
    return 2 * m * n * k, size * (m * k + k * n + m * n)


MATVEC = matmul(P.MATVEC, 1, P.MATVEC, FP32)
OUTER = matmul(P.OUTER, P.OUTER, P.THIN, BF16)
SQUARE_FP32 = matmul(P.SQUARE, P.SQUARE, P.SQUARE, FP32)
SQUARE_BF16 = matmul(P.SQUARE, P.SQUARE, P.SQUARE, BF16)
SOFTMAX = P.SOFTMAX_ROWS * P.SOFTMAX_COLS   # elements
NORM = P.NORM_ROWS * P.NORM_COLS
# x.t().contiguous(): every fp32 element it reads lies 32 KiB from its neighbour's, so each 32-byte sector serves
# 4 bytes: its reads cost SECTOR / FP32 = 8 times their bytes. Then the sum reads the copy and writes 8192 sums.
TRANSPOSE = P.TRANSPOSE * P.TRANSPOSE
TRANSPOSE_BYTES = FP32 * TRANSPOSE + FP32 * TRANSPOSE + FP32 * TRANSPOSE + FP32 * P.TRANSPOSE
TRANSPOSE_MOVED = SECTOR * TRANSPOSE + FP32 * TRANSPOSE + FP32 * TRANSPOSE + FP32 * P.TRANSPOSE


def model(gpu: dict) -> dict[str, dict]:
    """Each operation's regime, FLOPs, bytes and time (µs) on a GPU of ``gpu``'s figures, keyed as spec.toml's
    ``[reference_gpu]``: ``hbm_tb_s``, ``<peak>_tflops`` (``fp32``, ``bf16``), ``launch_alone_us`` and
    ``launch_in_stream_us``. The reference GPU's figures give `WORK`; a worker's own give what the key's reasoning
    predicts on it."""

    def memory(nbytes: float) -> float:
        return nbytes / (gpu["hbm_tb_s"] * 1e12) * 1e6

    def compute(flops: float, peak: str) -> float:
        return flops / (gpu.get(f"{peak}_tflops", math.nan) * 1e12) * 1e6   # NaN where the peak is not known

    def overhead(operations: int) -> float:
        """One operation alone on an idle GPU, then each further one in the stream of launches."""
        return gpu["launch_alone_us"] + (operations - 1) * gpu["launch_in_stream_us"]

    def work(regime: str, flops: float, nbytes: float, time_us: float) -> dict:
        return {"regime": regime, "flops": flops, "bytes": nbytes, "time_us": time_us}

    norm_bytes = 2 * FP32 * NORM + 2 * FP32 * P.NORM_COLS
    return {
        "add_small": work("overhead", P.SMALL, 3 * FP32 * P.SMALL, overhead(1)),
        "add_huge": work("memory", P.ADD, 3 * FP32 * P.ADD, memory(3 * FP32 * P.ADD)),
        "sum_small": work("overhead", P.SMALL, FP32 * P.SMALL + FP32, overhead(1)),
        "sum_huge": work("memory", P.SUM, FP32 * P.SUM + FP32, memory(FP32 * P.SUM + FP32)),
        "matvec": work("memory", *MATVEC, memory(MATVEC[1])),
        "matmul_outer": work("memory", *OUTER, memory(OUTER[1])),
        "matmul_fp32": work("compute", *SQUARE_FP32, compute(SQUARE_FP32[0], "fp32")),
        "matmul_bf16": work("compute", *SQUARE_BF16, compute(SQUARE_BF16[0], "bf16")),
        "softmax": work("memory", 5 * SOFTMAX, 2 * FP32 * SOFTMAX, memory(2 * FP32 * SOFTMAX)),
        "layer_norm": work("memory", 8 * NORM, norm_bytes, memory(norm_bytes)),
        "chain": work("overhead", 2 * P.CHAIN * P.SMALL, 2 * P.CHAIN * 2 * FP32 * P.SMALL, overhead(2 * P.CHAIN)),
        "transpose_sum": work("memory", TRANSPOSE, TRANSPOSE_BYTES, memory(TRANSPOSE_MOVED)),
    }


def _sig(value: float) -> float:
    return float(f"{value:.4g}")


def answers(work: dict[str, dict]) -> dict[str, dict]:
    """The answers ``work`` (`model`'s) gives: regime, intensity and time, to 4 significant figures."""
    return {op: {"regime": w["regime"], "intensity": _sig(w["flops"] / w["bytes"]), "time_us": _sig(w["time_us"])}
            for op, w in work.items()}


def figures(worker) -> dict:
    """The figures `model` takes for a grading worker (a `graders.roofline_engine.scoring.Worker`): its memory
    bandwidth and FP32 peak (from its clocks), its tensor-core peaks (a datasheet's, where the spec names its GPU)
    and its two launch figures, as the grading child measured them."""
    return {"name": worker.gpu, "hbm_tb_s": worker.bandwidth / 1e12,
            **{f"{peak}_tflops": rate / 1e12 for peak, rate in worker.peaks.items()},
            "launch_alone_us": worker.launch_s * 1e6, "launch_in_stream_us": worker.stream_s * 1e6}


WORK = model(GPU)
KEY = answers(WORK)
