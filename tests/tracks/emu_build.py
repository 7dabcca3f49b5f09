"""g++ builds of kernels for the CPU emulation of CUDA (cuda_emu/cuda_emu.h), each translation unit once.

The emulation's headers are precompiled once per builder, and a driver is compiled once per set of defines:
it calls the kernel as ``emu_kernel``, a symbol bound to the kernel's own name at link time. A kernel's build
is then its own translation unit and a link. Every object is kept under a key of its flags, defines and source,
so the same unit asked for twice is compiled once.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import threading
from pathlib import Path

CXX = shutil.which("g++")
EMU = Path(__file__).resolve().parent / "cuda_emu"


class EmuBuilder:
    """Builds into ``folder`` with ``flags`` (every compile and link), ``headers`` included before each unit."""

    def __init__(self, folder: Path, flags: list[str], headers: list[Path], timeout: float = 300):
        self.folder, self.flags, self.timeout = folder, [*flags, "-w", "-pthread"], timeout
        self.header = folder / "emu_headers.h"
        self.header.write_text("".join(f'#include "{h}"\n' for h in headers))
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def _gxx(self, *args) -> None:
        subprocess.run([CXX, *self.flags, *map(str, args)], check=True, timeout=self.timeout)

    def _once(self, key: str, target: Path, make) -> Path:
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if not target.exists():
                make(target)
        return target

    def _precompiled_header(self) -> list[str]:
        """``-include`` of the headers; g++ reads their precompiled form (``.gch`` beside them) where it fits."""
        self._once("pch", Path(f"{self.header}.gch"),
                   lambda gch: self._gxx("-x", "c++-header", self.header, "-o", gch))
        return ["-include", str(self.header)]

    def object(self, source: Path, defines: dict[str, object]) -> Path:
        """``source`` compiled with ``-D`` ``defines``."""
        flags = [f"-D{k}={v}" for k, v in defines.items()]
        key = hashlib.sha256(repr(flags).encode() + b"\0" + source.read_bytes()).hexdigest()[:20]
        return self._once(key, self.folder / f"{source.stem}-{key}.o",
                          lambda obj: self._gxx(*self._precompiled_header(), *flags, "-x", "c++", source,
                                                "-c", "-o", obj))

    def executable(self, source: Path, function: str, defines: dict[str, object], driver: Path,
                   driver_defines: dict[str, object] | None = None) -> Path:
        """The kernel ``function`` of ``source`` (compiled with ``defines``) linked into ``driver``."""
        driver_defines = {"KERNEL": "emu_kernel", **(driver_defines or {})}
        objects = [self.object(source, defines), self.object(driver, driver_defines)]
        key = hashlib.sha256("\0".join([function, *map(str, objects)]).encode()).hexdigest()[:20]
        return self._once(key, self.folder / f"{source.stem}-{function}-{key}",
                          lambda exe: self._gxx(*objects, f"-Wl,--defsym=emu_kernel={function}", "-o", exe))
