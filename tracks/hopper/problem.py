"""The ``bf16gemm_kmajor`` problem kind of the Hopper worklog: the tensor-core track's bf16 GEMM with B stored
column-major, so that both operands are K-major, the layout ``wgmma`` reads from shared memory without a transpose.

Shape ``(M, N, K)``: ``C = A @ B`` with ``A`` (M x K) bfloat16 row-major, ``B`` (K x N) bfloat16 column-major
(``B[k][n]`` at ``B[n * K + k]``: the transpose of a row-major N x K matrix) and ``C`` (M x N) fp32 row-major,
accumulated in fp32. Kernels are ``(float* C, const bf16* A, const bf16* B, int M, int N, int K)`` (``bf16`` =
``unsigned short``), followed by the tensor maps the spec describes. Inputs, tolerance (fp32 accumulation's,
`products_mismatch`), accuracy and baseline (cuBLAS bf16 through ``torch.mm`` of the same tensors, fp32 out) are
the tensor-core track's ``bf16gemm`` (``tracks/tensorcores/problem.py`` says why); no instruction probe: the
mma.sync ceiling that track reports is not this track's.
"""
from __future__ import annotations

import dataclasses

from graders import tracks

_products = tracks.get("tensorcores").problem_module()


def _inputs(shape, gen):
    """Row-major A (M x K) and column-major B (K x N: the transpose of a row-major N x K), both bf16, each fenced
    by NaN."""
    m, n, k = shape
    return [_products._fenced(m, k, gen, "bfloat16"), _products._fenced(n, k, gen, "bfloat16").t()]


PROBLEMS = [dataclasses.replace(
    _products._gemm("bf16gemm_kmajor", _inputs, "bf16", _products._reference, _products._cublas,
                    "cuBLAS bf16 GEMM (torch.mm, fp32 out)", "bf16 in, fp32 accumulate",
                    _products.mma_probe("m16n8k16", "f32.bf16.bf16.f32")),
    instruction_probe=None)]
