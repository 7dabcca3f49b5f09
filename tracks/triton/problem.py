"""Problem kinds of the Triton track: ``layer_norm``, ``matmul_fp16`` and ``matmul_bf16`` (its vector add and
row softmax are the CUDA tracks' ``vecadd`` and ``row_softmax``).

``layer_norm``: shape ``(rows, cols)``; inputs ``x`` (rows, cols), ``weight`` and ``bias`` (cols,), all fp32;
out (rows, cols) fp32, each row normalised to mean 0 and variance 1 (the biased variance, as
``torch.nn.functional.layer_norm``), then times ``weight`` plus ``bias``. Kernels take ``(out, x, weight, bias,
rows, cols, eps)``: ``eps`` (`LAYER_NORM_EPS`) is an argument, not a constant of the kernel. Each row's values
are N(0, 1) plus a shift of up to `LAYER_NORM_SHIFT`, times a scale of 0.1, 1 or 10: a variance taken without
the mean subtracted, or a reduction in fp16, is far outside the tolerance. Checked against a float64 layer norm
(`layer_norm_mismatch`). Timed against a device-to-device copy of x (the bytes a one-pass kernel reads and
writes, weight and bias aside), not ``torch.nn.functional.layer_norm``: the issue's goal is a share of a device
copy's bandwidth, the copy is the roof of any kernel that reads x once and writes out once (as for the row
softmax), and PyTorch's layer norm is one more kernel below that roof. Work in bytes, DRAM roof.

``matmul_fp16`` and ``matmul_bf16``: shape ``(M, N, K)``; ``a`` (M, K) and ``b`` (K, N), row-major and
contiguous, in fp16 or bf16; out (M, N) in the inputs' dtype (`TritonProblem.out_dtype`), the products summed in
fp32. Kernels take ``(out, a, b, M, N, K)``, one program per tile of out (a 1-D grid, so that the kernel orders
its tiles itself). Checked element by element against the fp32 product of the same inputs (`matmul_mismatch`):
within one unit in the last place of the output's dtype at the expected value (the rounding to fp16 or bf16),
plus `ACCUMULATION_SLACK` x K for fp32 sums in another order (the tensor cores truncate inside an MMA). A running
sum rounded to fp16 or bf16 at every K tile is off by more somewhere; inputs sit between NaN fences
(`graders.triton_engine.child`), so a load past K without its mask reads NaN or the next row. Timed against
``torch.matmul`` into the same output (cuBLAS), work in FLOPs (2 M N K). No hardware ceiling: the device reports
no tensor-core peak that could be read soundly (as for the tensor-core track's GEMMs). Triton's interpreter
cannot check a bf16 matmul (`TritonProblem.interpreter_gap`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from graders.cuda_engine.problems import Problem, Shape, Tensor, copy_bytes

LAYER_NORM_EPS = 1e-5
LAYER_NORM_SHIFT = 100.0   # a row's mean is up to this many of its standard deviations from 0
# fp32 layer norm against float64: the mean and the variance are sums of cols terms, each off by a few ulps of
# the row's largest |x| (tree sums); with |mean| up to 100 standard deviations, that is ~1e-5 of a normalised
# value. A variance without the mean subtracted is off by the squared mean; an fp16 reduction by ~1e-2 and more.
LAYER_NORM_ATOL = 2e-4     # |out - expected| <= ATOL x (|weight| + 1) + RTOL x |expected|
LAYER_NORM_RTOL = 1e-4
ACCUMULATION_SLACK = 2.0 ** -20   # per term of K


@dataclass(frozen=True)
class TritonProblem(Problem):
    """A problem kind of the Triton engine's own: ``out_dtype`` names its output's torch dtype;
    ``interpreter_gap``, where not empty, why Triton's interpreter cannot check its kernels on the CPU (the
    check cell then says so instead of running one)."""

    out_dtype: str = "float32"
    interpreter_gap: str = ""


# ---- layer norm -----------------------------------------------------------------------------------------

def layer_norm_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    """x: row r is N(0, 1) x a scale of 0.1, 1 or 10, plus a shift in +-LAYER_NORM_SHIFT scales; weight
    and bias N(0, 1)."""
    import torch
    rows, cols = shape
    x = torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32)
    scale = 10.0 ** (torch.randint(0, 3, (rows, 1), generator=gen, device=gen.device).float() - 1)
    shift = (torch.rand((rows, 1), generator=gen, device=gen.device) * 2 - 1) * LAYER_NORM_SHIFT
    weight = torch.randn((cols,), generator=gen, device=gen.device, dtype=torch.float32)
    bias = torch.randn((cols,), generator=gen, device=gen.device, dtype=torch.float32)
    return [(x + shift) * scale, weight, bias]


def layer_norm_reference(inputs: list[Tensor]) -> Tensor:
    import torch
    x, weight, bias = (t.double() for t in inputs)
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps=LAYER_NORM_EPS)


@dataclass(frozen=True)
class LayerNormExpected:
    """The float64 layer norm, and the weight its tolerance scales with."""

    out: Tensor
    weight: Tensor


def layer_norm_mismatch(out: Tensor, expected: LayerNormExpected) -> str:
    """'' if every output is within the tolerance of the float64 layer norm, else how many are not and the
    first."""
    import torch
    expected, weight = expected.out, expected.weight
    allowed = LAYER_NORM_ATOL * (weight.double().abs() + 1) + LAYER_NORM_RTOL * expected.abs()
    bad = torch.isnan(out) | ~((out.double() - expected).abs() <= allowed)
    count = int(bad.sum())
    if not count:
        return ""
    r, c = (int(i) for i in bad.nonzero()[0])
    got = float(out[r, c])
    never = " (NaN: never written, or read outside x, weight or bias)" if math.isnan(got) else ""
    return (f"{count} of {out.numel()} values outside fp32 layer norm's tolerance ({LAYER_NORM_ATOL:g} x (|weight| "
            f"+ 1) + {LAYER_NORM_RTOL:g} x |expected|); first at out[{r}][{c}]: expected "
            f"{float(expected[r, c]):.9g}, got {got:.9g}{never}")


LAYER_NORM = Problem(
    kind="layer_norm",
    signature="(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps)",
    shape_names=("rows", "cols"),
    make_inputs=layer_norm_inputs,
    out_shape=lambda s: (s[0], s[1]),
    reference=lambda inputs: LayerNormExpected(layer_norm_reference(inputs), inputs[1]),
    baseline=copy_bytes,
    baseline_name="device-to-device copy",
    work=lambda s: 8 * s[0] * s[1] + 8 * s[1],   # x read and out written once, weight and bias read once
    work_unit="B",
    sizes=lambda s: (s[0], s[1], LAYER_NORM_EPS),
    grid=lambda s, tile: (s[0], 1, 1),   # one program per row
    compare=layer_norm_mismatch,
    roof="dram",
)

# ---- matmul ---------------------------------------------------------------------------------------------

def matmul_inputs(shape: Shape, gen: Any, dtype: str) -> list[Tensor]:
    """a (M, K) and b (K, N), N(0, 1) rounded to ``dtype``."""
    import torch
    m, n, k = shape
    return [torch.randn(size, generator=gen, device=gen.device, dtype=torch.float32).to(getattr(torch, dtype))
            for size in ((m, k), (k, n))]


@dataclass(frozen=True)
class MatmulExpected:
    """The fp32 product, and the dtype and K its tolerance follows."""

    product: Tensor
    dtype: str
    k: int


def matmul_reference(inputs: list[Tensor]) -> MatmulExpected:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = inputs
    return MatmulExpected(a.float() @ b.float(), str(a.dtype).removeprefix("torch."), a.shape[1])


def matmul_mismatch(out: Tensor, expected: MatmulExpected) -> str:
    """'' if every element of ``out`` is within one unit in the last place of its dtype (at the expected value)
    plus ACCUMULATION_SLACK x K of the fp32 product, else how many are not and the first."""
    import torch
    product = expected.product
    mantissa, exponent = torch.frexp(product.abs())   # |product| = mantissa x 2^exponent, mantissa in [0.5, 1)
    ulp = torch.finfo(getattr(torch, expected.dtype)).eps * torch.ldexp(torch.ones_like(product), exponent - 1)
    allowed = ulp + ACCUMULATION_SLACK * expected.k
    bad = torch.isnan(out) | ~((out.float() - product).abs() <= allowed)
    count = int(bad.sum())
    if not count:
        return ""
    r, c = (int(i) for i in bad.nonzero()[0])
    got = float(out[r, c])
    never = " (NaN: never written, or read outside a or b)" if math.isnan(got) else ""
    return (f"{count} of {out.numel()} values more than one {expected.dtype} unit in the last place from the fp32 "
            f"product; first at out[{r}][{c}]: expected {float(product[r, c]):.6g} (to within "
            f"{float(allowed[r, c]):.3g}), got {got:.6g}{never}")


def _torch_matmul(out: Tensor, inputs: list[Tensor]) -> None:
    import torch
    torch.matmul(inputs[0], inputs[1], out=out)


def _matmul(dtype: str, short: str, interpreter_gap: str = "") -> TritonProblem:
    return TritonProblem(
        kind=f"matmul_{short}",
        signature="(out_ptr, a_ptr, b_ptr, M, N, K)",
        shape_names=("M", "N", "K"),
        make_inputs=lambda s, gen: matmul_inputs(s, gen, dtype),
        out_shape=lambda s: (s[0], s[1]),
        reference=matmul_reference,
        baseline=_torch_matmul,
        baseline_name="torch.matmul (cuBLAS)",
        work=lambda s: 2 * s[0] * s[1] * s[2],
        work_unit="FLOP",
        sizes=lambda s: s,
        grid=lambda s, tile: (-(-s[0] // tile[1]) * -(-s[1] // tile[0]), 1, 1),   # one program per tile, 1-D
        compare=matmul_mismatch,
        precision=f"{short} in and out, fp32 accumulate",
        out_dtype=dtype,
        interpreter_gap=interpreter_gap,
    )


MATMUL_FP16 = _matmul("float16", "fp16")
MATMUL_BF16 = _matmul("bfloat16", "bf16", "Triton's interpreter computes tl.dot of bf16 tiles wrongly")

PROBLEMS = [LAYER_NORM, MATMUL_FP16, MATMUL_BF16]
