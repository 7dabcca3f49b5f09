"""Problem kinds of the transpose ladder: ``copy`` (the roof) and ``transpose``.

fp32 matrices, row-major, ``in`` rows x cols; ``out`` is cols x rows (rows x cols for copy). Results must
be bit-identical; both are timed against a device-to-device copy of the same bytes.
"""
from __future__ import annotations

from dataclasses import replace

from graders.cuda_engine.problems import Problem, copy_bytes, matrix_bytes, random_matrix, tiles

COPY = Problem(
    kind="copy",
    signature="(float* out, const float* in, int rows, int cols)",
    shape_names=("rows", "cols"),
    make_inputs=random_matrix,
    out_shape=lambda s: (s[0], s[1]),
    reference=lambda inputs: inputs[0].clone(),
    baseline=copy_bytes,
    baseline_name="device-to-device copy",
    work=matrix_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=tiles,
    roof="dram",
)

# the same matrices, launch and baseline; only what the kernel writes differs
TRANSPOSE = replace(COPY, kind="transpose", out_shape=lambda s: (s[1], s[0]),
                    reference=lambda inputs: inputs[0].t().contiguous())

PROBLEMS = [COPY, TRANSPOSE]
