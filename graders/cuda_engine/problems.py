"""Problem kinds of the CUDA C++ engine: what a kernel of each kind computes, how it is called, and what it
is timed against.

A spec's kernel names its ``kind``. Kinds are defined by the tracks that bring them (``PROBLEMS``, a list of
`Problem`, in ``tracks/<name>/problem.py``; a Triton track's kinds are found for Triton specs only,
`KIND_SOURCES`) and found here by `problem`; the engine is never edited for a new kind. Kernels take
``(out, *inputs, *sizes)``: device pointers, then ``int`` sizes. torch is imported inside the functions, so
parsing a spec in a notebook does not import it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from graders import tracks

Shape = tuple[int, ...]
Tensor = Any  # torch.Tensor; kept loose so this module imports without torch


@dataclass(frozen=True)
class InstructionProbe:
    """A microbenchmark of the instruction a kind's kernels are built on (e.g. mma.sync in the kind's format):
    ``source`` defines ``extern "C" __global__ void probe(float* out, int iterations)``, in which every warp does
    ``work_per_warp_iteration`` units of the problem's work per iteration, from registers. The grading child runs
    it on every SM after timing (`graders.cuda_engine.child.Harness.instruction_ceiling`) and reports the
    kernel's throughput as a share of it; reported, never scored."""

    name: str                       # what it measures, e.g. "mma.sync m16n8k16 bf16, fp32 accumulate"
    source: str
    work_per_warp_iteration: int


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
    # (out, expected) -> '' if out is right, else why not; None: elementwise with ``atol``
    compare: Callable[[Tensor, Any], str] | None = None
    # the hardware ceiling no honest launch beats (`graders.cuda_engine.timing.peaks`): "dram" (``work`` bytes
    # at the memory's peak bandwidth) or "fp32" (``work`` FLOPs at the FP32 pipes' peak); None: none applies
    roof: str | None = None
    # SASS requirements (`graders.cuda_engine.sass.REQUIREMENTS`) every kernel of this kind must meet; one
    # unmet: status ``unmet``, correctness points only (e.g. no tensor cores in an FP32 GEMM)
    sass_requirements: tuple[str, ...] = ()
    # the number format a kernel of this kind computes in (e.g. "bf16 in, fp32 accumulate"), and what its error
    # measures: (out, expected) -> named errors of a correct output, recorded with each passing check; the
    # feedback tabulates both per kernel (the tensor-core track's precision menu). "" and None: neither
    precision: str = ""
    accuracy: Callable[[Tensor, Any], dict[str, float]] | None = None
    # the instruction's own rate, measured beside the kernel and reported as a second ceiling (not scored)
    instruction_probe: InstructionProbe | None = None


def random_matrix(shape: Shape, gen: Any) -> list[Tensor]:
    import torch
    return [torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32)]


def copy_bytes(out: Tensor, inputs: list[Tensor]) -> None:
    out.view(-1).copy_(inputs[0].view(-1))   # a device-to-device cudaMemcpyAsync of the same bytes


def tiles(shape: Shape, tile: tuple[int, int]) -> tuple[int, int, int]:
    rows, cols = shape
    return (-(-cols // tile[0]), -(-rows // tile[1]), 1)


def matrix_bytes(shape: Shape) -> int:
    return 2 * 4 * shape[0] * shape[1]   # fp32, read once and written once


# the tracks whose kinds a spec of each engine may name: a Triton kernel may also be graded on a CUDA track's kind,
# a TileLang kernel on a CUDA or a Triton track's
KIND_SOURCES = {"cuda": ("cuda",), "triton": ("cuda", "triton"), "tilelang": ("cuda", "triton")}


@functools.cache
def _registry(engine: str = "cuda") -> dict[str, Problem]:
    found: dict[str, Problem] = {}
    for track, module in [pair for source in KIND_SOURCES[engine] for pair in tracks.problem_modules(source)]:
        for p in getattr(module, "PROBLEMS", ()):
            if p.kind in found:
                raise tracks.TrackError(f"{track.folder}/problem.py: kind {p.kind!r} is defined twice")
            found[p.kind] = p
    return found


def kinds(engine: str = "cuda") -> list[str]:
    """Every problem kind a spec of ``engine`` may name (`KIND_SOURCES`)."""
    return list(_registry(engine))


def problem(kind: str, engine: str = "cuda") -> Problem:
    try:
        return _registry(engine)[kind]
    except KeyError:
        raise KeyError(f"no problem kind {kind!r}; known kinds: {', '.join(_registry(engine))}") from None
