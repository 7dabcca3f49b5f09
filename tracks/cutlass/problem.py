"""The ``f16gemm_kmajor`` problem kind of the CUTLASS rung: the Hopper track's ``bf16gemm_kmajor`` in fp16.

Shape ``(M, N, K)``: ``C = A @ B`` with ``A`` (M x K) fp16 row-major, ``B`` (K x N) fp16 column-major (``B[k][n]`` at
``B[n * K + k]``: both operands K-major) and ``C`` (M x N) fp32 row-major, accumulated in fp32. Kernels are
``(float* C, const f16* A, const f16* B, int M, int N, int K)`` (``f16`` = ``unsigned short``), followed by the
tensor maps the spec describes. Inputs, tolerance, accuracy and baseline (cuBLAS fp16 through ``torch.mm``, fp32
out) are the tensor-core track's ``f16gemm`` (``tracks/tensorcores/problem.py`` says why); no instruction probe, as
in the Hopper track. The bf16 step grades on ``bf16gemm_kmajor`` (``tracks/hopper/problem.py``) itself.
"""
from __future__ import annotations

import dataclasses

from graders import tracks

_products = tracks.get("tensorcores").problem_module()


def _inputs(shape, gen):
    """Row-major A (M x K) and column-major B (K x N: the transpose of a row-major N x K), both fp16, each fenced
    by NaN."""
    m, n, k = shape
    return [_products._fenced(m, k, gen, "float16"), _products._fenced(n, k, gen, "float16").t()]


PROBLEMS = [dataclasses.replace(
    _products._gemm("f16gemm_kmajor", _inputs, "f16", _products._reference, _products._cublas,
                    "cuBLAS fp16 GEMM (torch.mm, fp32 out)", "fp16 in, fp32 accumulate",
                    _products.mma_probe("m16n8k16", "f32.f16.f16.f32")),
    instruction_probe=None)]
