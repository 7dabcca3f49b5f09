"""Transpose submissions for the nbgrader tests: a correct-but-slow kernel for any part of the ladder."""
from __future__ import annotations

from graders.cuda_engine.spec import load_spec

SPEC = load_spec("transpose")

# The naive transpose, one column of the tile per thread: correct at any geometry, writes uncoalesced.
_SLOW = '''// correct but slow: no shared memory, every warp's store touches 32 memory segments
extern "C" __global__ void {function}(float* out, const float* in, int rows, int cols)
{{
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    for (int i = 0; i < TILE_X; i += BLOCK_X)
        for (int j = 0; j < TILE_Y; j += BLOCK_Y) {{
            const int row = blockIdx.y * TILE_Y + threadIdx.y + j;
            if (row < rows && col + i < cols) out[(size_t)(col + i) * rows + row] = in[(size_t)row * cols + col + i];
        }}
}}
'''


def slow_source(kernel_id: str) -> str:
    return _SLOW.format(function=SPEC.kernel(kernel_id).function)
