"""The ``sgemm`` problem kind of the GEMM worklog.

Shape ``(M, N, K)``: ``C = A @ B`` for row-major fp32 ``A`` (M x K) and ``B`` (K x N), checked against a
float64 reference with fp32 tolerances (`gemm_mismatch`) and timed against cuBLAS SGEMM (``torch.matmul``
with TF32 off), work in FLOPs (2 M N K).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graders.cuda_engine.problems import Problem, Shape, Tensor

# Tolerances for fp32 GEMM against a float64 reference. Each C[i][j] is a sum of K fp32 products; rounding
# error in any order of summation is at most about K * 2^-24 * (|A| @ |B|)[i][j] (6e-5 relative to that for
# K = 1024, 2.4e-4 for K = 4096), so ELEMENT_RTOL bounds every element with room to spare at K <= 16384,
# while a wrong index, a skipped tile or an unwritten element is off by the order of (|A| @ |B|)[i][j]
# itself. The relative Frobenius error of a correct kernel is about 1e-7 to 1e-6 (random rounding);
# FROBENIUS_RTOL is 100x that.
FROBENIUS_RTOL = 1e-4
ELEMENT_RTOL = 1e-3


@dataclass(frozen=True)
class GemmExpected:
    """The float64 reference product and each element's error allowance."""

    c: Tensor       # float64, M x N
    bound: Tensor   # float64, M x N: ELEMENT_RTOL * (|A| @ |B|) + a tiny absolute floor


INPUT_GUARD = 1 << 18   # NaN floats fenced before and after A and B (1 MiB each side)


def _fenced_randn(rows: int, cols: int, gen: Any) -> Tensor:
    """A random rows x cols matrix inside a NaN-filled buffer: a read past either end of it gives NaN."""
    import torch
    buffer = torch.full((rows * cols + 2 * INPUT_GUARD,), float("nan"), device=gen.device, dtype=torch.float32)
    body = buffer[INPUT_GUARD:INPUT_GUARD + rows * cols]
    body.normal_(generator=gen)
    return body.view(rows, cols)


def _gemm_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    m, n, k = shape
    return [_fenced_randn(m, k, gen), _fenced_randn(k, n, gen)]


def _gemm_reference(inputs: list[Tensor]) -> GemmExpected:
    a, b = (t.double() for t in inputs)
    return GemmExpected(a @ b, ELEMENT_RTOL * (a.abs() @ b.abs()) + 1e-30)


def gemm_mismatch(out: Tensor, expected: GemmExpected) -> str:
    """'' if fp32 ``out`` matches the float64 reference within the tolerances above, else what is wrong.

    NaN anywhere fails: C is poisoned with NaN before every run (an element never written stays NaN), and
    A and B sit between NaN guards (a read past their ends makes NaN).
    """
    import torch
    c = expected.c
    diff = out.double() - c
    nan = torch.isnan(out)
    bad = nan | ~(diff.abs() <= expected.bound)
    norm = float(torch.linalg.vector_norm(c))
    frob = float(torch.linalg.vector_norm(torch.where(nan, c, diff))) / norm if norm else 0.0
    count = int(bad.sum())
    if not count and frob <= FROBENIUS_RTOL:
        return ""
    parts = []
    if int(nan.sum()):
        i, j = (int(v) for v in nan.nonzero()[0])
        parts.append(f"{int(nan.sum())} of {out.numel()} values are NaN (never written, or computed from a read "
                     f"outside A or B, which are fenced with NaN), the first C[{i}][{j}]")
    if count:
        i, j = (int(v) for v in bad.nonzero()[0])
        parts.append(f"{count} of {out.numel()} values outside the fp32 tolerance; first at C[{i}][{j}]: "
                     f"expected {float(c[i, j]):.6g}, got {float(out[i, j]):.6g}")
    parts.append(f"relative Frobenius error {frob:.3g} (allowed {FROBENIUS_RTOL:g})")
    return "; ".join(parts)


def _cublas_sgemm(out: Tensor, inputs: list[Tensor]) -> None:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False    # true fp32 SGEMM, not TF32 tensor cores
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.matmul(inputs[0], inputs[1], out=out)


SGEMM = Problem(
    kind="sgemm",
    signature="(float* C, const float* A, const float* B, int M, int N, int K)",
    shape_names=("M", "N", "K"),
    make_inputs=_gemm_inputs,
    out_shape=lambda s: (s[0], s[1]),
    reference=_gemm_reference,
    baseline=_cublas_sgemm,
    baseline_name="cuBLAS SGEMM (torch.matmul, TF32 off)",
    work=lambda s: 2 * s[0] * s[1] * s[2],
    work_unit="FLOP",
    sizes=lambda s: (s[0], s[1], s[2]),
    grid=lambda s, tile: (-(-s[1] // tile[0]), -(-s[0] // tile[1]), 1),   # x over N (columns), y over M
    compare=gemm_mismatch,
    roof="fp32",
    sass_requirements=("no_tensor_cores",),   # a 3xTF32 product passes the fp32 tolerance on tensor cores
)

PROBLEMS = [SGEMM]
