"""Problem kinds: what a kernel of each kind computes, how it is called, and what it is timed against.

A spec's kernel names its ``kind``; everything kind-specific lives here, so a new assignment needs a spec
file and, at most, one new `Problem` registered in `PROBLEMS`. Kernels take ``(out, *inputs, *sizes)``:
device pointers, then ``int`` sizes. torch is imported inside the functions, so parsing a spec in a
notebook does not import it.

Next kind planned: ``sgemm`` (shape ``(M, N, K)``, inputs A and B, reference and baseline ``torch.mm`` with
TF32 off, work in FLOPs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Shape = tuple[int, ...]
Tensor = Any  # torch.Tensor; kept loose so this module imports without torch


@dataclass(frozen=True)
class Problem:
    kind: str
    signature: str                                       # the C signature students must write
    shape_names: tuple[str, ...]                         # what each entry of a shape means
    make_inputs: Callable[[Shape, Any], list[Tensor]]    # (shape, torch.Generator on the device)
    out_shape: Callable[[Shape], Shape]
    reference: Callable[[list[Tensor]], Tensor]
    baseline: Callable[[Tensor, list[Tensor]], None]     # the library operation the kernel is timed against
    baseline_name: str
    work: Callable[[Shape], int]                         # bytes moved (or FLOPs) per launch
    work_unit: str
    sizes: Callable[[Shape], tuple[int, ...]]            # the int arguments after the pointers
    grid: Callable[[Shape, tuple[int, int]], tuple[int, int, int]]   # (shape, tile) -> blocks
    atol: float = 0.0                                    # 0: results must be bit-identical


def _random_matrix(shape: Shape, gen: Any) -> list[Tensor]:
    import torch
    return [torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32)]


def _copy_bytes(out: Tensor, inputs: list[Tensor]) -> None:
    out.view(-1).copy_(inputs[0].view(-1))   # a device-to-device cudaMemcpyAsync of the same bytes


def _tiles(shape: Shape, tile: tuple[int, int]) -> tuple[int, int, int]:
    rows, cols = shape
    return (-(-cols // tile[0]), -(-rows // tile[1]), 1)


def _matrix_bytes(shape: Shape) -> int:
    return 2 * 4 * shape[0] * shape[1]   # fp32, read once and written once


COPY = Problem(
    kind="copy",
    signature="(float* out, const float* in, int rows, int cols)",
    shape_names=("rows", "cols"),
    make_inputs=_random_matrix,
    out_shape=lambda s: (s[0], s[1]),
    reference=lambda inputs: inputs[0].clone(),
    baseline=_copy_bytes,
    baseline_name="device-to-device copy",
    work=_matrix_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=_tiles,
)

TRANSPOSE = Problem(
    kind="transpose",
    signature="(float* out, const float* in, int rows, int cols)",
    shape_names=("rows", "cols"),
    make_inputs=_random_matrix,
    out_shape=lambda s: (s[1], s[0]),
    reference=lambda inputs: inputs[0].t().contiguous(),
    baseline=_copy_bytes,
    baseline_name="device-to-device copy",
    work=_matrix_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=_tiles,
)

PROBLEMS: dict[str, Problem] = {p.kind: p for p in (COPY, TRANSPOSE)}
