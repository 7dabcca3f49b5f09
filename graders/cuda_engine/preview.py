"""The CPU preview of a CUDA C++ kernel: whether it is correct at a few small public shapes, for a student
without a GPU. Never the grade: the GPU worker grades (correctness at every check shape, speed, races under
compute-sanitizer), and every line this module prints says so or says "CPU preview".

How: g++ compiles the kernel against a CPU emulation of CUDA (``emulation/``: cuda.h, precompiled; ptx.h for the
tracks' inline-PTX helpers, `EMULATED_PTX`; runtime.cpp, the launcher), with the launch's ``#define``s, and runs it
at the cheapest few of its spec's check shapes (`preview_shapes`) on public inputs (the problem's own generator,
seed `PUBLIC_SEED`), each launch in a child process with a limit of CPU time (`TIME_LIMIT_S`) and a 4 GiB
address-space cap (runtime.cpp). Each shape runs twice:

- A: blocks one at a time in increasing order; in a block, between two ``__syncthreads()``, each warp in turn as
  far as it can go, its lanes one at a time between its warp-level calls (shuffles, ``__syncwarp``, mma.sync),
  in increasing order; ``__shared__`` memory poisoned with NaN (bytes 0xFF) at the start of every block; every
  global buffer's end against an inaccessible page, and the end of the block's ``__shared__`` variables too;
- B: the same in decreasing order, ``__shared__`` memory zeroed, every start against an inaccessible page.

An access outside a buffer (beyond the 16-byte rounding of its end) stops the launch there, with the buffer, the
index and the thread; a write outside the output's exact bounds is caught by canaries. Outputs that differ
between A and B, where one of them is wrong, mean a race: a thread read shared memory before another wrote it, or
after another overwrote it (a missing ``__syncthreads()``). Otherwise A is judged by the problem's reference and
checker (`graders.cuda_engine.child.verdict`), the grader's own. A kernel with ``__device__`` variables keeps
state between launches, which one launch a shape cannot judge: correct there, it gets "?".

"Cannot run" ("?") where the emulation lacks something: inline PTX other than the helpers in `EMULATED_PTX`,
the wmma C++ API, anything g++ cannot compile here (the first error is quoted), a thread stack over 256 KiB, no
g++ at all, or a system other than Linux (WSL on Windows). Builds are kept under `cache_root`, keyed by their
inputs; verdicts for the life of the process.

Settings: ``WORKSHOP_CPU_PREVIEW=off`` (`enabled`): check cells only compile; ``WORKSHOP_PREVIEW_CACHE``: the
folder of the builds (`cache_root`).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Literal

from graders.cuda_engine.problems import Problem, Shape, problem
from graders.cuda_engine.spec import Geometry, KernelSpec, load_spec, resolve_geometry

EMULATION = Path(__file__).resolve().parent / "emulation"
PUBLIC_SEED = 2024              # the preview's inputs: public, the same on every machine
TIME_LIMIT_S = 10               # CPU seconds of one launch at one shape (and 3 x that + 30 s of wall time)
MAX_SHAPES = 3
SHAPE_COST_CAP = 5e7            # problem.work(shape) + THREAD_COST per thread launched
THREAD_COST = 50
# -mcmodel=medium (x86-64): a __device__ array over 2 GiB links
FLAGS = ["-std=c++20", "-O1", "-fno-strict-aliasing", "-ffp-contract=off", "-w",
         *(["-mcmodel=medium"] if platform.machine() in ("x86_64", "AMD64") else [])]
SHARED_START, SHARED_END = 0x200000, 0x300000   # where runtime.cpp expects the __shared__ variables
GRADED_ON_GPU = "not the grade: speed and real races are judged on the GPU worker"

# The inline-PTX helpers ptx.h emulates: a kernel's top-level function of this name whose every asm statement
# matches the pattern is replaced by ptx.h's function of the same name.
EMULATED_PTX = {
    "cp_async16": r"^cp\.async\.cg\.shared\.global ",
    "cp_async_commit": r"^cp\.async\.commit_group;?$",
    "cp_async_wait": r"^cp\.async\.wait_group ",
    "ldmatrix_x4": r"^ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 ",
    "ldmatrix_x4_trans": r"^ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16 ",
    "mma_bf16": r"^mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32 ",
    "mma_f16": r"^mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32 ",
    "mma_tf32": r"^mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32 ",
    "mma_e4m3": r"^mma\.sync\.aligned\.m16n8k32\.row\.col\.f32\.e4m3\.e4m3\.f32 ",
    "mma_e4m3_f16": r"^mma\.sync\.aligned\.m16n8k32\.row\.col\.f16\.e4m3\.e4m3\.f16 ",
    "pack_bf16": r"^cvt\.rn\.bf16x2\.f32 ",
    "tf32": r"^cvt\.rna\.tf32\.f32 ",
    "exp2_approx": r"^ex2\.approx(\.ftz)?\.f32 ",
    "sub_f16x2": r"^sub(\.rn)?\.f16x2 ",
    "fma_f16x2": r"^fma\.rn\.f16x2 ",
    "lop3_and_or": r"^lop3\.b32 %0, %1, %2, %3, 0xEA;?$",
    "f16_to_float": r"^\{ \.reg \.f16 (\w+); mov\.b16 \1, %1; cvt\.f32\.f16 %0, \1; \}$",
    "ld_stream": (r"^\{ \.reg \.pred (\w+); setp\.ne\.b32 \1, %5, 0; mov\.b32 %0, 0; mov\.b32 %1, 0; mov\.b32 %2, 0; "
                  r"mov\.b32 %3, 0; @\1 ld\.global\.nc(\.L1::no_allocate)?(\.L2::256B)?\.v4\.u32 \{%0, %1, %2, %3\}, "
                  r"\[%4\]; \}$"),
    "ld_scale": (r"^\{ \.reg \.pred (\w+); setp\.ne\.b32 \1, %2, 0; mov\.b16 %0, 0; "
                 r"@\1 ld\.global\.nc\.u16 %0, \[%1\]; \}$"),
    "f16x2_to_float2": (r"^\{ \.reg \.f16 (\w+), (\w+); mov\.b32 \{\1, \2\}, %2; cvt\.f32\.f16 %0, \1; "
                        r"cvt\.f32\.f16 %1, \2; \}$"),
    "e4m3_to_f16x2": (r"^\{ \.reg \.b16 (\w+), (\w+); mov\.b32 \{\1, \2\}, %2; cvt\.rn\.f16x2\.e4m3x2 %0, \1; "
                      r"cvt\.rn\.f16x2\.e4m3x2 %1, \2; \}$"),
    "load_a": r"^wmma\.load\.a\.sync\.aligned\.row\.m16n16k16\.(global|shared)\.bf16 ",
    "load_b": r"^wmma\.load\.b\.sync\.aligned\.row\.m16n16k16\.(global|shared)\.bf16 ",
    "mma": r"^wmma\.mma\.sync\.aligned\.row\.row\.m16n16k16\.f32\.bf16\.bf16\.f32 ",
    "store_c": r"^wmma\.store\.d\.sync\.aligned\.row\.m16n16k16\.(global|shared)\.f32 ",
}

Verdict = Literal["correct", "wrong", "cannot_run"]


@dataclasses.dataclass(frozen=True)
class Preview:
    """What the CPU preview found for one kernel. ``finding`` names it for tests and tools: correct, incorrect,
    race, out_of_bounds, deadlock, timeout, crashed, signature (wrong); unsupported, device_state, no_compiler
    (cannot run)."""

    kernel_id: str
    verdict: Verdict
    finding: str
    reason: str = ""                      # why it is wrong, or why the preview cannot judge it
    shape: Shape | None = None            # the shape it failed at
    shape_names: tuple[str, ...] = ()
    shapes: tuple[Shape, ...] = ()        # the shapes it ran at

    @property
    def mark(self) -> str:
        return {"correct": "✓", "wrong": "✗", "cannot_run": "?"}[self.verdict]

    @property
    def line(self) -> str:
        """The check cell's line."""
        if self.verdict == "correct":
            return (f"✓ {self.kernel_id}: correct at {_count(self.shapes)} on the CPU preview "
                    f"({', '.join(map(label, self.shapes))}; {GRADED_ON_GPU})")
        if self.verdict == "wrong":
            return f"✗ {self.kernel_id}: {self.failure}"
        return f"? {self.kernel_id}: {self.reason}"

    @property
    def failure(self) -> str:
        """Why it is wrong, after "CPU preview" and the shape (what the graded cell's public part raises)."""
        where = f", shape {label(self.shape)} ({', '.join(self.shape_names)})" if self.shape else ""
        return f"CPU preview{where}: {self.reason}"


def _count(shapes) -> str:
    return f"{len(shapes)} small shape{'s' if len(shapes) != 1 else ''}"


def label(shape: Shape) -> str:
    return " x ".join(map(str, shape))


class CannotRun(Exception):
    """The emulation cannot run this kernel; the message says why, for the student."""

    def __init__(self, message: str, finding: str = "unsupported"):
        super().__init__(message)
        self.finding = finding


# ---- the source the emulation compiles ----------------------------------------------------------------------

_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
_ASM = re.compile(r'\basm\s*(?:volatile\s*|__volatile__\s*)?\(\s*((?:"(?:\\.|[^"\\])*"\s*)+)')
_ATTRIBUTES = re.compile(r"\b__launch_bounds__\s*\([^)]*\)|\b__align__\s*\([^)]*\)|__attribute__\s*\(\(.*?\)\)")


def _blank(source: str) -> str:
    """``source`` with strings and comments replaced by spaces (same length): braces in them do not count."""
    return _STRING_OR_COMMENT.sub(lambda m: " " * len(m.group()), source)


def _asm_texts(part: str) -> list[str]:
    """The instruction text of every asm statement in ``part`` (its string literals joined)."""
    return [" ".join("".join(re.findall(r'"((?:\\.|[^"\\])*)"', m.group(1))).split()) for m in _ASM.finditer(part)]


def _instruction(text: str) -> str:
    """The first instruction of an asm statement's text, past its register declarations."""
    statements = [s.strip("{} ") for s in text.replace("\\n", " ").split(";")]
    return next((s.split(" ")[0] for s in statements if s and not s.startswith(".")), text)


def _lines(part: str, directives: bool) -> str:
    """``part`` with only its preprocessor lines (a ``#define`` before a helper, continued lines too), or with only
    its other lines (``directives=False``), the lines left out empty."""
    kept, directive = [], False
    for line in part.splitlines(keepends=True):
        directive = directive or line.lstrip().startswith("#")
        kept.append(line if directive == directives else "\n" * line.count("\n"))
        directive = directive and line.rstrip("\n").endswith("\\")
    return "".join(kept)


def emulated_source(source: str) -> tuple[str, list[str]]:
    """``source`` without its inline-PTX helpers that ptx.h emulates, and their names; `CannotRun` for PTX or APIs
    the emulation lacks."""
    blank = _blank(source)
    if re.search(r"\bnvcuda\b|\bwmma::|#\s*include\s*<mma\.h>", blank):
        raise CannotRun("it uses the wmma C++ API (nvcuda::wmma), which the CPU preview does not emulate")
    if re.search(r"\bextern\s+__shared__\b", blank):
        raise CannotRun("it uses dynamic shared memory (extern __shared__), which the CPU preview does not emulate "
                        "(the grader launches with it where the spec gives dynamic_smem)")
    keep, replaced, start, depth = [], [], 0, 0
    for i, ch in enumerate(blank):
        depth += (ch == "{") - (ch == "}")
        if depth == 0 and ch in ";}":
            part = blank[start:i + 1]
            if ch == "}" and re.search(r"\basm\b", part):
                code = _lines(part, directives=False)
                header = _ATTRIBUTES.sub(" ", code[:code.index("{")])
                name = (re.findall(r"([A-Za-z_]\w*)\s*\(", header) or ["?"])[0]
                texts = _asm_texts(source[start:i + 1])
                pattern = EMULATED_PTX.get(name)
                if not pattern or not texts or not all(re.search(pattern, t) for t in texts):
                    what = ", ".join(dict.fromkeys(f"`{_instruction(t)}`" for t in texts)) or "asm"
                    raise CannotRun(f"it uses inline PTX ({what} in {name}), which the CPU preview does not emulate")
                replaced.append(name)
                keep.append(_lines(source[start:i + 1], directives=True))   # the line numbers stay the student's
            else:
                keep.append(source[start:i + 1])
            start = i + 1
    text = "".join(keep) + source[start:]
    if re.search(r"\basm\b", _blank(text)):
        what = ", ".join(dict.fromkeys(f"`{_instruction(t)}`" for t in _asm_texts(text))) or "asm"
        raise CannotRun(f"it uses inline PTX ({what}), which the CPU preview does not emulate")
    return text, list(dict.fromkeys(replaced))


def device_variables(source: str) -> list[str]:
    """The names of the ``__device__`` variables ``source`` declares (state that lives on between launches)."""
    blank = _blank(source)
    names = []
    for match in re.finditer(r"\b__device__\b", blank):
        rest = blank[match.end():]
        end = re.search(r"[;{(]", rest)
        if not end:
            continue
        segment = rest[:end.start()]
        if end.group() == "{" or (end.group() == "(" and "=" not in segment):
            continue   # a function
        declarator = re.split(r"[=\[]", segment)[0]
        found = re.findall(r"[A-Za-z_]\w*", _ATTRIBUTES.sub(" ", declarator))
        if found:
            names.append(found[-1])
    return names


def translation_unit(source: str, function: str, name: str) -> str:
    """What g++ compiles: the emulated helpers' using-declarations, the student's lines (numbered as in their
    cell) and the runtime's two entry points."""
    text, replaced = emulated_source(source)
    return ("".join(f"using emu_ptx::{n};\n" for n in replaced) + f'#line 1 "{name}"\n{text}\n#line 1 "cpu-preview"\n'
            f'extern "C" void emu_entry(void* const* p, const long long* n) {{ emu_call(&{function}, p, n); }}\n'
            f'extern "C" void emu_signature(int* p, int* n) {{ *p = emu_pointer_count(&{function}); '
            f"*n = emu_int_count(&{function}); }}\n")


# ---- building ----------------------------------------------------------------------------------------------

def enabled() -> bool:
    """False only when ``WORKSHOP_CPU_PREVIEW=off``. (Read here, not in `graders.settings`: that module is part of
    the measuring code whose hash the tracks' measured targets carry, `workshop.records.measurement_code`.)"""
    return os.environ.get("WORKSHOP_CPU_PREVIEW", "").strip().lower() != "off"


def cache_root() -> Path:
    """``WORKSHOP_PREVIEW_CACHE``, else ``$XDG_CACHE_HOME/kernel-workshop/cpu-preview`` (``~/.cache/...``)."""
    chosen = os.environ.get("WORKSHOP_PREVIEW_CACHE", "").strip()
    return Path(chosen) if chosen else (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                        / "kernel-workshop" / "cpu-preview")


class BuildFailed(Exception):
    """g++ refused a translation unit; the message is its first error."""


class Toolchain:
    """g++ and a folder of builds keyed by their inputs: the precompiled emulation header, the runtime's object,
    each kernel's object and executables. Every file appears whole (written aside, then renamed)."""

    def __init__(self, cxx: str, root: Path):
        self.cxx = cxx
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
        key = _digest(cxx, version, *FLAGS, EMULATION,
                      *(p.read_bytes() for p in sorted(EMULATION.iterdir()) if p.is_file()))
        self.folder = root / key[:16]
        self.folder.mkdir(parents=True, exist_ok=True)
        self.header = self.folder / "emulation.h"
        if not self.header.exists():
            _write(self.header, f'#include "{EMULATION / "cuda.h"}"\n#include "{EMULATION / "ptx.h"}"\n')
        self._made: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def _once(self, target: Path, make) -> Path:
        """``target``, made by ``make(scratch)`` unless it exists; one maker at a time, also across processes."""
        import fcntl   # POSIX: the preview runs on Linux only, and this module is imported everywhere
        with self._lock:
            lock = self._made.setdefault(str(target), threading.Lock())
        with lock:
            if target.exists():
                return target
            with open(target.with_name(f".{target.name}.lock"), "w") as held:
                fcntl.flock(held, fcntl.LOCK_EX)   # another process (a second notebook, a test worker) may be making it
                if not target.exists():
                    scratch = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
                    try:
                        make(scratch)
                        os.replace(scratch, target)
                    finally:
                        scratch.unlink(missing_ok=True)
        return target

    def _gxx(self, *args, what: str) -> None:
        done = subprocess.run([self.cxx, *FLAGS, *map(str, args)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "LC_ALL": "C"})
        if done.returncode != 0:
            raise BuildFailed(first_error(done.stderr, what))

    def _included(self) -> list[str]:
        self._once(Path(f"{self.header}.gch"),
                   lambda gch: self._gxx("-x", "c++-header", self.header, "-o", gch, what="the emulation"))
        return ["-include", str(self.header)]

    def runtime(self) -> Path:
        return self._once(self.folder / "runtime.o", lambda obj: self._gxx(
            *self._included(), "-x", "c++", EMULATION / "runtime.cpp", "-c", "-o", obj, what="the runtime"))

    def kernel(self, unit: str, defines: dict[str, int]) -> Path:
        flags = [f"-D{k}={v}" for k, v in sorted(defines.items())]
        key = _digest(unit, *flags)[:24]
        source = self.folder / f"kernel-{key}.cpp"
        if not source.exists():
            _write(source, unit)
        return self._once(self.folder / f"kernel-{key}.o", lambda obj: self._gxx(
            *self._included(), *flags, "-x", "c++", source, "-c", "-o", obj, what="your kernel"))

    def executable(self, kernel: Path, shared_at: int) -> Path:
        """``kernel`` linked with the runtime, its ``__shared__`` variables (section emu_shared) at ``shared_at``."""
        runtime = self.runtime()
        return self._once(kernel.with_name(f"{kernel.stem}-{shared_at:x}.exe"), lambda exe: self._gxx(
            "-no-pie", kernel, runtime, f"-Wl,--section-start=emu_shared={shared_at:#x}", "-o", exe, what="the link"))


def _write(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    scratch.write_text(text)
    os.replace(scratch, path)


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def first_error(stderr: str, what: str) -> str:
    """g++'s first error, as ``line N: message`` for the student's own lines."""
    for line in stderr.splitlines():
        found = re.match(r"(.*?):(\d+):(?:\d+:)? (?:fatal )?error: (.*)", line)
        if found:
            place = f"line {found.group(2)}: " if not found.group(1).endswith(("cpu-preview", ".h", ".cpp")) else ""
            return f"{place}{found.group(3)}"
    tail = stderr.strip().splitlines()
    return f"g++ failed on {what}" + (f": {tail[-1]}" if tail else "")


@dataclasses.dataclass(frozen=True)
class SharedLayout:
    """The block's ``__shared__`` variables in an executable (its section emu_shared): (name, offset, bytes) each."""

    size: int
    alignment: int
    variables: tuple[tuple[str, int, int], ...]

    def name_at(self, offset: int) -> tuple[str, int, int]:
        """The variable ``offset`` (outside the section) runs past: the first before it, the last after it."""
        ordered = sorted(self.variables, key=lambda v: v[1])
        return (ordered[0] if offset < 0 else ordered[-1]) if ordered else ("?", 0, self.size)


def shared_layout(executable: Path) -> SharedLayout | None:
    """The emu_shared section of an x86-64 or AArch64 ELF ``executable`` and its symbols; None when it has none."""
    data = executable.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    # name, type, flags, addr, offset, size, link, info, addralign, entsize
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, at: int) -> str:
        start = headers[table][4] + at
        return data[start:data.index(b"\0", start)].decode(errors="replace")

    index = next((i for i, h in enumerate(headers) if string(shstrndx, h[0]) == "emu_shared"), None)
    if index is None:
        return None
    base, size, alignment = headers[index][3], headers[index][5], headers[index][8]
    variables = []
    for h in headers:
        if h[1] != 2:   # SHT_SYMTAB
            continue
        for at in range(h[4], h[4] + h[5], 24):
            name, info, _, shndx, value, bytes_ = struct.unpack_from("<IBBHQQ", data, at)
            if shndx == index and info & 0xF == 1:   # STT_OBJECT
                variables.append((_unmangled(string(h[6], name)), value - base, bytes_))
    return SharedLayout(size, alignment, tuple(variables))


def _unmangled(symbol: str) -> str:
    """A static local's own name (``_ZZ15transpose_tiledE4tile`` -> ``tile``); other symbols as they are."""
    found = re.match(r"_ZZ.*?E(\d+)", symbol)
    return symbol[found.end():found.end() + int(found.group(1))] if found else symbol


@functools.cache
def toolchain() -> Toolchain | None:
    """g++ with its builds under `cache_root`, or a fresh temporary folder where that cannot be written; None
    without g++."""
    cxx = shutil.which("g++")
    if not cxx:
        return None
    try:
        return Toolchain(cxx, cache_root())
    except OSError:
        return Toolchain(cxx, Path(tempfile.mkdtemp(prefix="cpu-preview-builds-")))


# ---- running -----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Launch:
    """One run's outcome: ``report`` (runtime.cpp's key-value lines) and the output's bytes when it finished."""

    report: dict[str, str]
    output: bytes | None = None


def launch(exe: Path, order: str, layout: str, poison: int, grid, block, buffers: list[tuple[bytes | None, int, int]],
           ints, time_limit_s: float, folder: Path) -> Launch:
    """Run ``exe`` once: ``buffers`` are (bytes or None for the output, element size, elements)."""
    result = folder / f"result-{order}"
    args = [str(exe), str(result), order, layout, str(poison), str(max(1, math.ceil(time_limit_s))),
            *map(str, grid), *map(str, (*block, 1)[:3]), str(len(buffers))]
    for i, (data, element, elements) in enumerate(buffers):
        path = folder / f"buffer{i}-{order}"
        if data is not None:
            path.write_bytes(data)
        args += [str(path), str(element), str(elements)]
    args += [str(len(ints)), *map(str, ints)]
    result.unlink(missing_ok=True)
    try:
        done = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=3 * time_limit_s + 30, cwd=folder)
    except subprocess.TimeoutExpired:
        return Launch({"status": "timeout", "wall": str(3 * time_limit_s + 30)})
    except OSError as exc:
        return Launch({"status": "start", "error": str(exc)})
    report = dict(line.split(" ", 1) for line in result.read_text().splitlines() if " " in line) \
        if result.exists() else {}
    if not report:
        report = {"status": "died", "code": str(done.returncode), "stderr": done.stderr.decode(errors="replace")[-300:]}
    output = (folder / f"buffer0-{order}").read_bytes() if report.get("status") == "ok" else None
    return Launch(report, output)


def preview_shapes(kernel: KernelSpec, definition: Problem, geometry: Geometry) -> list[Shape]:
    """The cheapest ``MAX_SHAPES`` of the kernel's check shapes whose cost is under ``SHAPE_COST_CAP`` (the
    cheapest one if none is), cheapest first."""
    def cost(shape: Shape) -> float:
        threads = math.prod(definition.grid(shape, geometry.tile)) * math.prod(geometry.block)
        return definition.work(shape) + THREAD_COST * threads
    ranked = sorted(kernel.check_shapes, key=cost)
    return ([s for s in ranked if cost(s) <= SHAPE_COST_CAP] or ranked[:1])[:MAX_SHAPES]


def parameter_names(signature: str) -> list[str]:
    return re.findall(r"(\w+)\s*(?=[,)])", signature)


def _coordinates(values: list[int], extent) -> str:
    """``values`` as CUDA indexes: one number for a one-dimensional extent, else (x, y) or (x, y, z)."""
    used = max([1] + [i + 1 for i, e in enumerate(extent) if e > 1])
    return f"({', '.join(map(str, values[:used]))})" if used > 1 else str(values[0])


def _where(report: dict[str, str], grid, block) -> str:
    if "block" not in report:
        return ""
    return (f" in block {_coordinates([int(v) for v in report['block'].split()], grid)}, "
            f"thread {_coordinates([int(v) for v in report['thread'].split()], (*block, 1))}")


def describe(report: dict[str, str], definition: Problem, buffers, shared: SharedLayout | None, grid, block,
             time_limit_s: float) -> tuple[str, str]:
    """(finding, reason) of a launch that did not finish, from runtime.cpp's report."""
    status, where = report.get("status"), _where(report, grid, block)
    names = parameter_names(definition.signature)
    if status == "fault":
        verb = {"read": "reads", "write": "writes"}.get(report.get("access"), "accesses")
        if report["buffer"] == "none":
            return "out_of_bounds", f"{verb} memory far outside every buffer (an index far out of bounds?){where}"
        index = int(report["index"])
        if report["buffer"] == "shared":
            name, offset, size = (shared or SharedLayout(int(report["size"]), 1, ())).name_at(index)
            side = "before the start" if index < 0 else "past the end"
            return "out_of_bounds", (f"{verb} {side} of the __shared__ array `{name}` (byte {index - offset} of its "
                                     f"{size}){where}")
        b = int(report["buffer"])
        name, elements = names[b], buffers[b][2]
        if 0 <= index < elements and b > 0:
            return "out_of_bounds", f"writes to its input `{name}` (index {index}), which it may only read{where}"
        far = " far" if report.get("wild") else ""
        return "out_of_bounds", f"{verb} `{name}`{far} out of bounds (index {index} of {elements}){where}"
    if status == "deadlock":
        waits = [w.split(":") for w in report.get("waiting", "").split(";") if ":" in w]
        thread = {what: _coordinates([int(v) for v in t.split(",")], (*block, 1)) for t, what in reversed(waits)}
        return "deadlock", ("the block's threads never meet: thread " + thread.get("warp", "?") + " waits at a "
                            "warp-level call (__shfl_*_sync, __syncwarp, ...) that lanes of its warp named in the mask "
                            "never reach" + (f", while thread {thread['__syncthreads']} waits at __syncthreads()"
                                             if "__syncthreads" in thread else ""))
    if status == "timeout":
        limit = f"{float(report['wall']):g} s" if "wall" in report else f"{time_limit_s:g} s of CPU time"
        return "timeout", (f"did not finish within {limit}{where} (an endless loop? a loop whose condition never "
                           "changes?)")
    if status == "stack":
        raise CannotRun(f"a thread's local variables outgrow the CPU preview's stack of 256 KiB{where}")
    if status == "arguments":
        return "signature", (f"the kernel takes {report['pointers']} pointer(s) and {report['ints']} int(s); the "
                             f"grader passes {len(buffers)} and {len(names) - len(buffers)}, as in the signature "
                             f"{definition.signature}")
    if status == "signal":
        name = report.get("name")
        if name in ("SIGABRT", "SIGILL", "SIGTRAP"):
            return "crashed", f"stopped at __trap() or a failed assert(){where}"
        if name == "SIGFPE":
            raise CannotRun(f"it divides an integer by zero{where}, which stops a CPU but not a GPU (where the "
                            "result is undefined)")
        return "crashed", f"crashed ({name}){where}"
    if status == "memory":
        raise CannotRun("it needs more memory than the CPU preview's cap of 4 GiB of address space")
    detail = report.get("error") or "".join(report.get("stderr", "").strip().splitlines()[-1:]) \
        or f"exit code {report.get('code')}"
    raise CannotRun(f"the CPU preview's launch failed ({status}: {detail})", "crashed")


def _buffers_of(inputs, out_elements: int) -> list[tuple[bytes | None, int, int]]:
    """The launch's buffers: the output's size, and each input's memory from its first element to its last as the
    kernel sees it (a transposed view is column-major there)."""
    import torch
    found: list[tuple[bytes | None, int, int]] = [(None, 4, out_elements)]
    for t in inputs:
        extent = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        memory = t.as_strided((extent,), (1,)).clone()
        found.append((memory.view(torch.uint8).numpy().tobytes(), t.element_size(), extent))
    return found


def run_preview(kernel: KernelSpec, geometry: Geometry, source: str, shapes: list[Shape], *,
                time_limit_s: float = TIME_LIMIT_S) -> Preview:
    """The preview of ``source`` as ``kernel`` at ``shapes`` with ``geometry``; see the module's docstring."""
    definition = problem(kernel.kind)
    base = dict(kernel_id=kernel.id, shape_names=definition.shape_names, shapes=tuple(shapes))
    if not sys.platform.startswith("linux"):   # ELF sections, the linker's --section-start, Linux's signals
        return Preview(verdict="cannot_run", finding="no_compiler", reason=(
            "the CPU preview runs on Linux only (on Windows, in WSL); the GPU worker still grades"), **base)
    tools = toolchain()
    if tools is None:
        return Preview(verdict="cannot_run", finding="no_compiler",
                       reason="the CPU preview needs g++; the GPU worker still grades", **base)
    try:
        unit = translation_unit(source, kernel.function, f"{kernel.id}.cu")
        obj = tools.kernel(unit, geometry.defines())
        start_flush = tools.executable(obj, SHARED_START)
        shared = shared_layout(start_flush)
        step = max(shared.alignment, 16) if shared else 16
        end_flush = (tools.executable(obj, SHARED_END - -(-shared.size // step) * step) if shared and shared.size
                     else start_flush)
        with tempfile.TemporaryDirectory(prefix="cpu-preview-") as scratch:
            for shape in shapes:
                found = _run_shape(definition, geometry, shape, (end_flush, start_flush), shared, Path(scratch),
                                   time_limit_s)
                if found:
                    return Preview(verdict="wrong", finding=found[0], reason=found[1], shape=shape, **base)
    except BuildFailed as exc:
        return Preview(verdict="cannot_run", finding="unsupported", reason=(
            f"the CPU preview cannot compile it for the CPU ({exc}); the GPU worker grades it"), **base)
    except CannotRun as exc:
        return Preview(verdict="cannot_run", finding=exc.finding,
                       reason=f"the CPU preview cannot run this kernel: {exc}; the GPU worker grades it", **base)
    state = device_variables(source)
    if state:
        return Preview(verdict="cannot_run", finding="device_state", reason=(
            f"correct at {_count(shapes)} on the CPU preview, but it keeps state in __device__ variables "
            f"({', '.join(state)}) from launch to launch, which one launch a shape cannot judge; the GPU worker "
            "grades it"), **base)
    return Preview(verdict="correct", finding="correct", **base)


def _run_shape(definition: Problem, geometry: Geometry, shape: Shape, executables, shared: SharedLayout | None,
               folder: Path, time_limit_s: float) -> tuple[str, str] | None:
    """(finding, reason) of the kernel's two launches at ``shape``, or None when both are right."""
    import torch

    from graders.cuda_engine.child import verdict
    generator = torch.Generator().manual_seed(PUBLIC_SEED)
    inputs = definition.make_inputs(shape, generator)
    out_shape = definition.out_shape(shape)
    buffers = _buffers_of(inputs, math.prod(out_shape))
    grid, sizes = definition.grid(shape, geometry.tile), definition.sizes(shape)
    outputs = []
    for exe, order, layout, poison in ((executables[0], "forward", "end", 0xFF),
                                       (executables[1], "reverse", "start", 0)):
        done = launch(exe, order, layout, poison, grid, geometry.block, buffers, sizes, time_limit_s, folder)
        if done.output is None:
            return describe(done.report, definition, buffers, shared, grid, geometry.block, time_limit_s)
        outputs.append(torch.frombuffer(bytearray(done.output), dtype=torch.float32).view(out_shape))
    expected = definition.reference(inputs)
    wrong = [verdict(definition, out, expected) for out in outputs]
    same = torch.equal(outputs[0].view(torch.int32), outputs[1].view(torch.int32))
    if same:
        return ("incorrect", wrong[0]) if wrong[0] else None
    if not any(wrong):
        return None   # different roundings, both right (float atomics in another order)
    which = "increasing" if wrong[0] else "decreasing"
    return "race", ("a race (a missing __syncthreads()?) or a read of __shared__ memory no thread wrote: the result "
                    "depends on the order in which threads run between barriers, or on what __shared__ memory held "
                    f"before; with threads in {which} order, {_race_nan(wrong[0] or wrong[1])}")


def _race_nan(message: str) -> str:
    """The checker's message, where a NaN is said to be what ``__shared__`` memory held before a thread wrote it."""
    return message.replace("(NaN: your kernel never wrote it)", "(NaN: what __shared__ memory held before any "
                                                                "thread wrote it)")


_results: dict[tuple, Preview] = {}
_results_lock = threading.Lock()


def preview(assignment: str | Path, kernel_id: str, source: str, *, block=None, tile=None, params=None) -> Preview:
    """The check cell's preview of one kernel at its spec's preview shapes (`preview_shapes`), kept for the life
    of the process (the graded cell's public part asks again for the same source)."""
    spec = load_spec(assignment)
    kernel = spec.kernel(kernel_id)
    geometry = resolve_geometry(kernel, block, tile, params)
    shapes = preview_shapes(kernel, problem(kernel.kind), geometry)
    key = (str(spec.path), kernel_id, source, geometry)
    with _results_lock:
        if key in _results:
            return _results[key]
    try:
        found = run_preview(kernel, geometry, source, shapes)
    except Exception as exc:   # a check cell never raises: the preview is only a preview
        return Preview(kernel_id, "cannot_run", "crashed", f"the CPU preview failed ({type(exc).__name__}: {exc}); "
                       "the GPU worker grades it", shapes=tuple(shapes))
    if found.finding != "timeout":
        with _results_lock:
            _results[key] = found
    return found
