"""The ``vecadd`` problem kind: ``out[i] = a[i] + b[i]`` for fp32 vectors of ``n`` elements.

Shape ``(n,)``. Kernels are ``(float* out, const float* a, const float* b, int n)``, launched on
ceil(n / TILE_X) blocks (the vector is one row of n columns, so TILE_Y is 1). Results must be bit-identical
to ``a + b``; the kernel is timed against ``torch.add(a, b, out=out)``, work in bytes moved (12 per
element: two 4-byte reads and one 4-byte write). Every pointer the grader passes is 16-byte aligned (fresh
torch allocations; the output view starts 1 MiB into its guarded buffer), so float4 accesses at indices
that are multiples of 4 are aligned.
"""
from __future__ import annotations

from graders.cuda_engine.problems import Problem, Shape, Tensor, tiles


def _two_vectors(shape: Shape, gen) -> list[Tensor]:
    import torch
    return [torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32) for _ in range(2)]


def _torch_add(out: Tensor, inputs: list[Tensor]) -> None:
    import torch
    torch.add(inputs[0], inputs[1], out=out)


VECADD = Problem(
    kind="vecadd",
    signature="(float* out, const float* a, const float* b, int n)",
    shape_names=("n",),
    make_inputs=_two_vectors,
    out_shape=lambda s: (s[0],),
    reference=lambda inputs: inputs[0] + inputs[1],
    baseline=_torch_add,
    baseline_name="torch.add",
    work=lambda s: 12 * s[0],
    work_unit="B",
    sizes=lambda s: (s[0],),
    grid=lambda s, tile: tiles((1, s[0]), tile),
    roof="dram",
)

PROBLEMS = [VECADD]
