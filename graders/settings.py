"""Where the course's files are, and every ``WORKSHOP_*`` setting, read in one place.

Paths are under the checkout this package is in (``ROOT``), or under ``WORKSHOP_ROOT`` when it is set:

- ``tracks/<name>/``: one folder per track (see `graders.tracks`);
- ``assignments/<name>/<name>.ipynb``: the nbgrader source notebook built from the track (nbgrader's
  ``source_directory``; everything in it is released, so it holds nothing but the notebook);
- ``benchmarks/results/``: measured numbers, one file per GPU run.

Settings (environment variables):

- ``WORKSHOP_ROOT``: the checkout to read tracks from (default: this package's);
- ``WORKSHOP_TARGET``: ``sim`` or ``gpu`` forces where numba kernels run (default: the GPU when found); ``sim``
  also grades a model track's ``ModelNew`` on the CPU at its small sizes (`graders.model_engine.grade`);
- ``WORKSHOP_GPU=0``: behave as if there were no GPU;
- ``WORKSHOP_KERNEL_TIMEOUT``: seconds a grading child may run (default 30);
- ``WORKSHOP_LAUNCH_TIMEOUT``: seconds one checked launch of a CUDA kernel may run before it is called hung and its
  grading child answers ``timeout`` (default 10; `graders.cuda_engine.child.Harness.finish_launch`);
- ``WORKSHOP_SEED``: the seed of every hidden input (default: a fresh one per grading), to reproduce a
  failure whose message names its seed (see `graders.result`);
- ``WORKSHOP_CELL_TIMEOUT``: seconds a notebook cell may run during autograde (default 120);
- ``WORKSHOP_SANDBOX=off``, ``WORKSHOP_BWRAP`` and ``WORKSHOP_SANDBOX_CGROUPS=off``: see `graders.sandbox.run`
  and `graders.sandbox.confine` (which reads the last itself: it runs without this package);
- ``WORKSHOP_CHILD_MEMORY_GIB``: the memory cap of a grading child that names none itself (default 32 GiB: the
  whole sandbox through its cgroup, else per process; see `graders.sandbox.run.run_child`);
- ``WORKSHOP_PERF_BUDGET_S``: seconds of timed runs per CUDA kernel (default: the spec's budget);
- ``WORKSHOP_CUOBJDUMP``, ``WORKSHOP_NVDISASM``, ``WORKSHOP_COMPUTE_SANITIZER``: the tools to use;
- ``WORKSHOP_SANITIZE=off``: skip the compute-sanitizer runs of CUDA kernels (`graders.cuda_engine.sanitizer`);
- ``WORKSHOP_GRADEBOOK_URL``: the gradebook's database URL (default: ``sqlite:///gradebook.db``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


ROOT = Path(os.environ.get("WORKSHOP_ROOT", PACKAGE_ROOT))
TRACKS = ROOT / "tracks"
ASSIGNMENTS = ROOT / "assignments"
RESULTS = ROOT / "benchmarks" / "results"


def kernel_timeout_s() -> float:
    return float(os.environ.get("WORKSHOP_KERNEL_TIMEOUT", "30"))


DEFAULT_LAUNCH_TIMEOUT_S = 10.0


def launch_timeout_s() -> float:
    """``WORKSHOP_LAUNCH_TIMEOUT`` (a positive number of seconds, default 10); `ValueError` otherwise."""
    return _positive_number("WORKSHOP_LAUNCH_TIMEOUT", DEFAULT_LAUNCH_TIMEOUT_S, "seconds")


def forced_seed() -> int | None:
    """``WORKSHOP_SEED`` as an int, or None when it is unset; `ValueError` unless it is in [0, 2**63)."""
    text = os.environ.get("WORKSHOP_SEED", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) >= 1 << 63:
        raise ValueError(f"WORKSHOP_SEED={text!r} is not a seed (an integer from 0 to 2**63 - 1)")
    return int(text)


def cell_timeout_s() -> int:
    return int(os.environ.get("WORKSHOP_CELL_TIMEOUT", "120"))


def forced_target() -> str | None:
    """``sim`` or ``gpu`` when ``WORKSHOP_TARGET`` forces where numba kernels run, else None."""
    value = os.environ.get("WORKSHOP_TARGET")
    return value if value in ("sim", "gpu") else None


def gpu_disabled() -> bool:
    return os.environ.get("WORKSHOP_GPU") == "0"


def sandbox_enabled() -> bool:
    """False only when ``WORKSHOP_SANDBOX=off``."""
    return os.environ.get("WORKSHOP_SANDBOX", "").strip().lower() != "off"


def bwrap_binary() -> str | None:
    """``WORKSHOP_BWRAP``, else ``bwrap`` on PATH, else None."""
    return os.environ.get("WORKSHOP_BWRAP") or shutil.which("bwrap")


def child_memory_bytes() -> int:
    """``WORKSHOP_CHILD_MEMORY_GIB`` (a positive number of GiB, default 32) in bytes; `ValueError` otherwise."""
    return int(_positive_number("WORKSHOP_CHILD_MEMORY_GIB", 32.0, "GiB") * (1 << 30))


def _positive_number(name: str, default: float, unit: str) -> float:
    """The variable ``name`` (``default`` where it is unset or empty); `ValueError`, naming it, unless it is a finite
    positive number."""
    text = os.environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{name}={text!r} is not a positive number of {unit}")
    return value


def perf_budget_s(default: float) -> float:
    """Seconds of timed runs per kernel: ``WORKSHOP_PERF_BUDGET_S`` when it is a positive number."""
    text = os.environ.get("WORKSHOP_PERF_BUDGET_S", "").strip()
    try:
        return float(text) if text and float(text) > 0 else default
    except ValueError:
        return default


def tool_override(name: str) -> str | None:
    """``WORKSHOP_CUOBJDUMP``, ``WORKSHOP_NVDISASM`` or ``WORKSHOP_COMPUTE_SANITIZER`` (``name`` with '-' as
    '_'): a binary to use instead of the one found."""
    return os.environ.get(f"WORKSHOP_{name.upper().replace('-', '_')}") or None


def sanitize_enabled() -> bool:
    """False only when ``WORKSHOP_SANITIZE=off``."""
    return os.environ.get("WORKSHOP_SANITIZE", "").strip().lower() != "off"


def gradebook_url() -> str:
    return os.environ.get("WORKSHOP_GRADEBOOK_URL", "sqlite:///gradebook.db")
