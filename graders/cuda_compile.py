"""Compile a student's CUDA C++ source to a cubin with NVRTC, through NVIDIA's ``cuda.core``.

Why cuda.core rather than CuPy's ``RawModule``: cuda.core is NVIDIA's official Python layer over the driver
and NVRTC, installs from pip (``cuda-core`` + the ``nvidia-cuda-nvrtc`` wheel), compiles to a cubin for a
named architecture with no GPU and no driver present (so compile errors are tested in CI), and keeps CuPy
off the GPU workers: the workers only need torch (for buffers) and cuda.core (to compile and launch).

The grader prepends a short header of ``#define``s (the launch geometry) and then ``#line 1`` so that the
compiler's messages carry the line numbers of the student's own cell. ptxas's verbose report (registers,
spills, shared memory per kernel) is parsed and returned as data.
"""
from __future__ import annotations

import io
import re
from dataclasses import asdict, dataclass, field
from typing import Any

try:
    from cuda.core import Program, ProgramOptions
except ImportError:  # cuda.core before 0.4 kept its API under .experimental
    from cuda.core.experimental import Program, ProgramOptions

DEFAULT_ARCH = "sm_90"      # the H200 workers; used when no GPU is present to ask
CELL_NAME = "your_kernel.cu"


class CompileError(Exception):
    """The source did not compile, or lacks a kernel the assignment needs; the message is for the student."""


@dataclass(frozen=True)
class Resources:
    """ptxas's report for one kernel."""

    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int

    def summary(self) -> str:
        spills = self.spill_stores + self.spill_loads
        return (f"{self.registers} registers, {self.shared_bytes} B shared memory, "
                + (f"{spills} B of spills" if spills else "no spills"))


@dataclass(frozen=True)
class Compiled:
    cubin: bytes
    arch: str
    resources: dict[str, Resources]   # by kernel (entry function) name
    log: str
    object_code: Any = field(repr=False, compare=False, default=None)   # cuda.core ObjectCode, to load

    def resources_dict(self) -> dict[str, dict[str, int]]:
        return {name: asdict(r) for name, r in self.resources.items()}


def header(defines: dict[str, int]) -> str:
    """The lines put before the student's source: the defines, then a ``#line`` back to line 1."""
    lines = [f"#define {name} {value}" for name, value in defines.items()]
    return "\n".join([*lines, f'#line 1 "{CELL_NAME}"', ""])


def compile_cuda(source: str, *, kernels: tuple[str, ...] = (), defines: dict[str, int] | None = None,
                 arch: str = DEFAULT_ARCH) -> Compiled:
    """Compile ``source`` to a cubin for ``arch``; raise `CompileError` if it fails or lacks ``kernels``."""
    options = ProgramOptions(arch=arch, name=CELL_NAME, std="c++17", ptxas_options="-v")
    logs = io.StringIO()
    try:
        obj = Program(header(defines or {}) + source, "c++", options=options).compile("cubin", logs=logs)
    except Exception as exc:  # cuda.core raises NVRTCError (its class moved between releases)
        if "NVRTC_ERROR_COMPILATION" not in str(exc):
            raise
        raise CompileError(readable_error(str(exc))) from None
    log = logs.getvalue().replace("\x00", "")
    resources = parse_resources(log)
    for name in kernels:
        if name not in resources:
            raise CompileError(missing_kernel_message(name, list(resources)))
    return Compiled(bytes(obj.code), arch, resources, log, obj)


def readable_error(nvrtc_message: str) -> str:
    """NVRTC's log, trimmed to the diagnostics, with ``your_kernel.cu(7): `` written as ``line 7: ``."""
    text = nvrtc_message.split("compilation log:", 1)[-1]
    lines = [line for line in text.strip("\n\x00 ").splitlines() if "detected in the compilation of" not in line]
    body = re.sub(rf"^{re.escape(CELL_NAME)}\((\d+)\): ", r"line \1: ", "\n".join(lines).rstrip(), flags=re.M)
    return "Your CUDA code did not compile:\n" + body


def missing_kernel_message(name: str, found: list[str]) -> str:
    mangled = [f for f in found if name in f]
    hint = (f'; it looks like `{name}` lacks extern "C" (the compiled name is {mangled[0]})' if mangled
            else f"; kernels found: {', '.join(found) or 'none'}")
    return (f'No kernel named `{name}`{hint}. Declare it as: extern "C" __global__ void {name}(...)')


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_resources(log: str) -> dict[str, Resources]:
    """Per-kernel registers, shared memory and spills from ptxas's ``-v`` report."""
    found: dict[str, Resources] = {}
    parts = _ENTRY.split(log)
    for name, text in zip(parts[1::2], parts[2::2]):
        frame = _FRAME.search(text)
        used = _USED.search(text)
        smem = _SMEM.search(text)
        stack, stores, loads = (int(g) for g in frame.groups()) if frame else (0, 0, 0)
        found[name] = Resources(int(used.group(1)) if used else 0, int(smem.group(1)) if smem else 0,
                                stack, stores, loads)
    return found
