"""The TileLang engine's track specs: the CUDA C++ engine's spec format (`graders.cuda_engine.spec`: cases, shapes,
problem kinds, floors, targets, points) without a geometry: a TileLang kernel's launch (its grid, threads, tiles
and stages) is its own, written in its builder (`graders.tilelang_engine.kernel_source`). Its kinds are the CUDA
and Triton tracks' (`graders.cuda_engine.problems.KIND_SOURCES`).
"""
from __future__ import annotations

from pathlib import Path

from graders.cuda_engine.spec import AssignmentSpec, parse_spec, read_toml, spec_path

_NO_GEOMETRY = {"block": [1, 1], "tile": [1, 1]}   # the CUDA geometry, which a TileLang kernel does not take


def load_tilelang_spec(assignment: str | Path) -> AssignmentSpec:
    path = spec_path(assignment)
    data = read_toml(path, "spec")
    return parse_spec({**data, "assignment": dict(data.get("assignment") or {}) | _NO_GEOMETRY}, path,
                      engine="tilelang")
