"""Compile a student's CUDA C++ source to a cubin with NVRTC, through NVIDIA's ``cuda.core``.

Why cuda.core rather than CuPy's ``RawModule``: cuda.core is NVIDIA's official Python layer over the driver
and NVRTC, installs from pip (``cuda-core`` + the ``nvidia-cuda-nvrtc`` wheel), compiles to a cubin for a
named architecture with no GPU and no driver present (so compile errors are tested in CI), and keeps CuPy
off the GPU workers: the workers only need torch (for buffers) and cuda.core (to compile and launch).

The grader prepends a short header of ``#define``s (the launch geometry) and then ``#line 1`` so that the
compiler's messages carry the line numbers of the student's own cell.

The kernels a source defines are read from the cubin itself (its ELF symbol table: the ``STO_CUDA_ENTRY``
functions), never from a compiler log. ptxas's verbose report (registers, spills, shared memory per kernel)
is best-effort: NVRTC 12.9+ keeps a compile cache (see NVIDIA/cuda-python#1124, NVIDIA/Fuser#4694), and on a
cache hit ptxas does not run and the ``-v`` log is empty. We ask for ``--no-cache`` (``no_cache=True``)
where cuda.core and NVRTC accept it; where the log still lacks a kernel, its registers and stack frame come
from the cubin's ``.nv.info`` attributes and shared memory and spills are reported as unknown (None).
"""
from __future__ import annotations

import io
import re
import struct
from dataclasses import asdict, dataclass, field
from typing import Any

from graders.cuda_engine.libraries import include_paths

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
    """ptxas's report for one kernel; None where it is not known (see the module's docstring)."""

    registers: int | None
    shared_bytes: int | None
    stack_bytes: int | None
    spill_stores: int | None
    spill_loads: int | None
    source: str = "ptxas"      # "ptxas" (its -v log) or "cubin" (the ELF's attributes: fewer fields)

    def summary(self) -> str:
        return resources_summary(asdict(self))


def resources_summary(r: dict) -> str:
    """``Resources`` (as a dict) in words; unknown fields are said to be unknown."""
    registers = f"{r['registers']} registers" if r.get("registers") is not None else "registers unknown"
    shared = (f"{r['shared_bytes']} B shared memory" if r.get("shared_bytes") is not None
              else "shared memory unknown")
    if r.get("spill_stores") is None or r.get("spill_loads") is None:
        spills = "spills unknown"
    else:
        total = r["spill_stores"] + r["spill_loads"]
        spills = f"{total} B of spills" if total else "no spills"
    return f"{registers}, {shared}, {spills}"


UNKNOWN = Resources(None, None, None, None, None, source="unknown")


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
                 arch: str = DEFAULT_ARCH, lineinfo: bool = False, libraries: tuple[str, ...] = ()) -> Compiled:
    """Compile ``source`` to a cubin for ``arch``; raise `CompileError` if it fails or lacks ``kernels``.
    ``lineinfo``: with the source lines of each instruction, for a tool's report (never for a graded launch).
    ``libraries``: header libraries the source may include (`graders.cuda_engine.libraries`)."""
    text = header(defines or {}) + source
    obj, log = None, ""
    for no_cache in (True, False):   # False: a cuda.core or NVRTC that does not know --no-cache
        try:
            options = _options(arch, no_cache, lineinfo, libraries)
        except TypeError:
            continue
        logs = io.StringIO()
        try:
            obj = Program(text, "c++", options=options).compile("cubin", logs=logs)
        except Exception as exc:  # cuda.core raises NVRTCError (its class moved between releases)
            if no_cache and "INVALID_OPTION" in str(exc):
                continue
            if "NVRTC_ERROR_COMPILATION" not in str(exc):
                raise
            raise CompileError(readable_error(str(exc))) from None
        log = logs.getvalue().replace("\x00", "")
        break
    cubin = bytes(obj.code)
    found = kernels_in_cubin(cubin)
    for name in kernels:
        if name not in found:
            raise CompileError(missing_kernel_message(name, found))
    return Compiled(cubin, arch, resources_for(found, log, cubin), log, obj)


def compile_ptx(source: str, *, defines: dict[str, int] | None = None, arch: str = DEFAULT_ARCH,
                libraries: tuple[str, ...] = ()) -> str:
    """``source`` compiled to PTX for ``arch`` (the text, inline assembly verbatim); raises `CompileError`.

    Through NVRTC's own bindings: cuda.core asks the driver whether it could load the PTX, and a machine
    without a GPU has none."""
    from cuda.bindings import nvrtc
    text = (header(defines or {}) + source).encode()
    err, program = nvrtc.nvrtcCreateProgram(text, CELL_NAME.encode(), 0, [], [])
    try:
        options = _options(arch.replace("sm_", "compute_"), no_cache=False, libraries=libraries,
                           ptxas_verbose=False).as_bytes("nvrtc")
        (err,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
            raise CompileError(readable_error(log.decode(errors="replace")))
        _, size = nvrtc.nvrtcGetPTXSize(program)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(program, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return ptx.decode(errors="replace").replace("\x00", "")


def _options(arch: str, no_cache: bool, lineinfo: bool = False, libraries: tuple[str, ...] = (),
             ptxas_verbose: bool = True) -> ProgramOptions:
    """NVRTC's options for a cell: C++17, the libraries' include folders and ``-default-device``
    (`graders.cuda_engine.libraries`), ptxas's ``-v`` log where a cubin is made."""
    extra = ({"no_cache": True} if no_cache else {}) | ({"lineinfo": True} if lineinfo else {})
    extra |= {"ptxas_options": "-v"} if ptxas_verbose else {}
    if libraries:
        extra |= {"include_path": include_paths(libraries), "device_as_default_execution_space": True}
    return ProgramOptions(arch=arch, name=CELL_NAME, std="c++17", **extra)


def resources_for(kernels: list[str], log: str, cubin: bytes) -> dict[str, Resources]:
    """Each kernel's resources: from ptxas's log where it has them, else what the cubin records."""
    from_log = parse_resources(log)
    from_cubin: dict[str, Resources] | None = None
    found = {}
    for name in kernels:
        if name in from_log:
            found[name] = from_log[name]
            continue
        if from_cubin is None:
            try:
                from_cubin = cubin_resources(cubin)
            except (ValueError, struct.error):
                from_cubin = {}
        found[name] = from_cubin.get(name, UNKNOWN)
    return found


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


# --- the cubin's ELF: kernels, per-kernel attributes, global memory, in pure Python (no driver, no cuobjdump)

_STO_CUDA_ENTRY = 0x10          # st_other bit of a kernel (an entry function) in a CUDA ELF
_STT_FUNC = 2
_EIATTR_FRAME_SIZE = 0x11       # .nv.info attributes: (symbol index, value) pairs
_EIATTR_REGCOUNT = 0x2F
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


def _elf(cubin: bytes) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, int]]]:
    """(sections as (name, type, offset, size), symbols as (name, info, other, section index))."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, offset: int) -> str:
        start = raw[table][4] + offset
        return cubin[start:cubin.index(b"\0", start)].decode(errors="replace")

    sections = [(string(shstrndx, r[0]), r[1], r[4], r[5]) for r in raw]
    symbols = []
    for r in raw:
        if r[1] == 2:   # SHT_SYMTAB; its sh_link is the string table of the names
            for off in range(r[4], r[4] + r[5], 24):
                st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", cubin, off)
                symbols.append((string(r[6], st_name), st_info, st_other, st_shndx))
    return sections, symbols


def kernels_in_cubin(cubin: bytes) -> list[str]:
    """The kernels (``__global__`` functions, as compiled: mangled unless extern "C") a cubin defines."""
    _, symbols = _elf(cubin)
    return [name for name, info, other, _ in symbols
            if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY and name]


def cubin_resources(cubin: bytes) -> dict[str, Resources]:
    """Registers and stack frame of each kernel from the cubin's ``.nv.info``; shared memory and spills
    are not recorded there in a form we trust (sm_90 adds reserved shared memory), so they are None."""
    sections, symbols = _elf(cubin)
    values: dict[tuple[int, int], int] = {}
    for name, _, offset, size in sections:
        if name != ".nv.info":
            continue
        pos, end = offset, offset + size
        while pos + 2 <= end:
            fmt, attr = cubin[pos], cubin[pos + 1]
            if fmt == _EIFMT_SVAL:
                length, = struct.unpack_from("<H", cubin, pos + 2)
                if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and length == 8:
                    index, value = struct.unpack_from("<II", cubin, pos + 4)
                    values[(attr, index)] = value
                pos += 4 + length
            elif fmt == _EIFMT_HVAL or fmt == _EIFMT_BVAL:
                pos += 4
            else:
                pos += 2
    found = {}
    for index, (name, info, other, _) in enumerate(symbols):
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY:
            found[name] = Resources(values.get((_EIATTR_REGCOUNT, index)), None,
                                    values.get((_EIATTR_FRAME_SIZE, index)), None, None, source="cubin")
    return found


def global_memory(cubin: bytes) -> dict[str, int]:
    """``GLOBAL``: the bytes of the module's ``__device__`` variables (its ELF's ``.nv.global`` and
    ``.nv.global.init`` sections; cuobjdump's own GLOBAL is 32 bits wide and reads 0 for 4 GiB); ``MALLOC``: 1
    if it calls device-side malloc (``malloc``, also what ``new`` calls, is an undefined function symbol)."""
    sections, symbols = _elf(cubin)
    size = sum(size for name, _, _, size in sections if name in (".nv.global", ".nv.global.init"))
    malloc = any(name == "malloc" and info & 0xF == _STT_FUNC and index == 0 for name, info, _, index in symbols)
    return {"GLOBAL": size, "MALLOC": int(malloc)}
