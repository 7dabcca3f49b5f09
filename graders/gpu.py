"""Is there a CUDA GPU here? Asked without side effects on the calling process.

The probe runs in a short-lived subprocess (``cuInit`` + device count through cuda.bindings), so the caller
(a notebook kernel, the autograder) never creates a CUDA context, loads the driver or holds GPU memory.
``WORKSHOP_GPU=0`` forces "no GPU" (CPU-only workers, tests).

``python -m graders.gpu --require`` exits with status 3 and a message when no GPU is present: run it
before autograding a GPU-only assignment, so a CPU-only worker stops instead of recording zeros.
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import dataclass

from graders import settings

NO_GPU_EXIT = 3

_PROBE = """
import json
from cuda.bindings import driver
def ok(r):
    return int(r[0]) == 0
res = driver.cuInit(0)
if not ok(res):
    print(json.dumps(None)); raise SystemExit
err, n = driver.cuDeviceGetCount()
if not ok((err,)) or n < 1:
    print(json.dumps(None)); raise SystemExit
_, dev = driver.cuDeviceGet(0)
_, name = driver.cuDeviceGetName(64, dev)
attr = driver.CUdevice_attribute
_, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
_, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
print(json.dumps({"name": name.split(b"\\0")[0].decode(), "count": n, "cc": [major, minor]}))
"""


class NeedsGPUWorker(RuntimeError):
    """Raised when GPU-only grading is asked for on a machine without a GPU."""


@dataclass(frozen=True)
class GpuInfo:
    name: str
    count: int
    compute_capability: tuple[int, int]

    @property
    def arch(self) -> str:
        return "sm_{}{}".format(*self.compute_capability)


@functools.cache
def detect_gpu() -> GpuInfo | None:
    """The first CUDA GPU, or None. Cached for the life of the process."""
    if settings.gpu_disabled():
        return None
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
        found = json.loads(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        found = None
    if not found:
        return None
    return GpuInfo(found["name"], found["count"], tuple(found["cc"]))


def no_gpu_message(what: str) -> str:
    return (f"{what} needs a GPU worker: no CUDA GPU was found on this machine. Nothing was graded; "
            "run the autograder on a machine with an NVIDIA GPU.")


def require_gpu(what: str) -> GpuInfo:
    info = detect_gpu()
    if info is None:
        raise NeedsGPUWorker(no_gpu_message(what))
    return info


def main(argv: list[str]) -> int:
    info = detect_gpu()
    if info is None:
        print(no_gpu_message("This assignment"), file=sys.stderr)
        return NO_GPU_EXIT if "--require" in argv else 0
    print(f"GPU: {info.name} ({info.arch}), {info.count} device(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
