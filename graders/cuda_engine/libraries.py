"""Header libraries a CUDA C++ kernel may include: the include folders and NVRTC options a spec's ``libraries`` adds.

``libraries = ["cutlass"]`` (a spec key, inherited like the geometry; `graders.cuda_engine.extended_launch`) compiles
the kernel against CUTLASS's C++ templates and CuTe, its layout algebra, with NVRTC as every CUDA kernel is compiled:

- CUTLASS and CuTe: the headers of the ``nvidia-cutlass`` wheel (``cutlass_library/source/include``), at
  `CUTLASS_VERSION`. It is installed without its dependencies (``pip install --no-deps nvidia-cutlass==4.2.0.0``):
  they serve CUTLASS's Python interface, which the grader does not use, and its ``cuda-python`` would write its own
  ``cuda/bindings`` over cuda-bindings'. Only the headers are read; the package is never imported.
- The CUDA headers CUTLASS includes (``cuda_fp16.h``, ``cuda_bf16.h``, ``cuda_runtime_api.h``, libcu++'s
  ``cuda/std``), which NVRTC 13.0 does not bring: the ``include`` folder of the ``nvidia-cuda-runtime`` and
  ``nvidia-cuda-cccl`` wheels (``nvidia/cu13/include``), else the CUDA toolkit's (``$CUDA_HOME``, ``/usr/local/cuda``).
- NVRTC's ``-default-device``: CUTLASS declares some ``constexpr`` helpers without ``__device__``, which NVRTC would
  take for host functions.

Only a spec that names a library gets its headers: elsewhere ``#include <cuda_bf16.h>`` stays a compile error, as
those tracks teach. Compiling CuTe's templates takes seconds (9 to 18 s for the CUTLASS track's GEMM on two busy
cores), inside the grading child's limits like any compile.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

LIBRARIES = ("cutlass",)
CUTLASS_VERSION = "4.2.0.0"   # the nvidia-cutlass wheel whose headers the CUTLASS track is written against
INSTALL = f"pip install --no-deps nvidia-cutlass=={CUTLASS_VERSION}"


class LibraryMissing(RuntimeError):
    """A library's headers are not installed where the grader looks; the message says what to install."""


@functools.cache
def cutlass_include() -> Path:
    """The folder holding ``cute/`` and ``cutlass/``: the nvidia-cutlass wheel's (found, not imported)."""
    spec = importlib.util.find_spec("cutlass_library")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        include = Path(folder) / "source" / "include"
        if (include / "cute" / "tensor.hpp").is_file():
            return include
    raise LibraryMissing(f"CUTLASS's headers are not installed: {INSTALL}")


@functools.cache
def cuda_includes() -> tuple[Path, ...]:
    """The folder of ``cuda_fp16.h`` and its kin, and libcu++'s ``cccl`` folder with its parent (CUTLASS includes both
    ``cuda/std/...`` and ``cccl/cuda/std/...``): the nvidia wheels' (``nvidia/cu13/include`` on any path, each wheel
    perhaps in a folder of its own), else the toolkit's."""
    spec = importlib.util.find_spec("nvidia")
    wheels = [Path(p) / "cu13" / "include" for p in (spec.submodule_search_locations or [])] if spec else []
    folders = [*wheels, Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "include"]
    headers = next((f for f in folders if (f / "cuda_fp16.h").is_file()), None)
    cccl = next((f / "cccl" for f in folders if (f / "cccl" / "cuda" / "std" / "cstdint").is_file()), None)
    if headers is None or cccl is None:
        raise LibraryMissing("the CUDA headers CUTLASS includes are not installed: pip install "
                             "nvidia-cuda-runtime nvidia-cuda-cccl (pyproject.toml pins them), or a CUDA toolkit")
    return tuple(dict.fromkeys((headers, cccl.parent, cccl)))


def include_paths(libraries: tuple[str, ...]) -> list[str]:
    """NVRTC's include folders for ``libraries`` (names in `LIBRARIES`); `LibraryMissing` when one is absent."""
    unknown = set(libraries) - set(LIBRARIES)
    if unknown:
        raise ValueError(f"unknown libraries {sorted(unknown)}; known: {', '.join(LIBRARIES)}")
    if not libraries:
        return []
    return [str(cutlass_include()), *map(str, cuda_includes())]
