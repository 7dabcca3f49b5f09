"""Problem kinds of the Triton track: ``layer_norm`` (its vector add and row softmax are the CUDA tracks'
``vecadd`` and ``row_softmax``).

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

PROBLEMS = [LAYER_NORM]
