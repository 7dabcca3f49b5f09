"""Child handler (run by `graders.sandbox.run.run_child` with `ENV` set): launch one kernel once and, when it
faults, read the GPU core dump the CUDA driver wrote with cuda-gdb in batch mode, in the same sandbox.

`ENV` turns the driver's core dump on (``CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1``) into the sandbox's private /tmp,
without a CPU core dump, without the GPU's memory (the faulting warp's state and the code are what is read) and
without the abort the driver calls after writing it, so that this process lives on to read it. The kernel is
compiled with its source lines. The answer: ``lines``, what cuda-gdb says of the exception (`exception_lines`:
the exception, the PC and its source line, the frame); ``why``, when there are none.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from graders.cuda_engine.child import _is_cuda_error
from graders.cuda_engine.compile import CELL_NAME
from graders.cuda_engine.launch_child import launch_once
from graders.cuda_engine.sass import find_tool
from graders.cuda_engine.spec import load_spec, resolve_geometry

DUMP = "/tmp/your_kernel.cudacore"
ENV = {"CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "1", "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": "0",
       "CUDA_COREDUMP_FILE": DUMP,
       "CUDA_COREDUMP_GENERATION_FLAGS": "skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,"
                                         "skip_local_memory,skip_abort"}
GDB_TIMEOUT_S = 60.0   # cuda-gdb opening the dump and printing where it stopped
_EXCEPTION = re.compile(r"^(CUDA Exception: .*|The exception was triggered at .*|#0 .* at \S+:\d+)$")
_CELL_PATH = re.compile(r" at \S*/(" + re.escape(CELL_NAME) + r":\d+)$")   # cuda-gdb puts the compile's directory first


def exception_lines(text: str) -> list[str]:
    """What cuda-gdb printed of the exception, in its words: ``CUDA Exception: ...``, ``The exception was
    triggered at PC ... (FILE:LINE)``, the innermost frame ``#0 ... at FILE:LINE`` (the cell's file named without
    the directory it was compiled in), and the source line it shows under it (``LINE<tab>code``), each once, in
    its order."""
    lines = [_CELL_PATH.sub(r" at \1", line.rstrip()) for line in text.splitlines()]
    found: list[str] = []
    for i, line in enumerate(lines):
        if _EXCEPTION.match(line) and line not in found:
            found.append(line)
            if line.startswith("#0 ") and i + 1 < len(lines) and re.match(r"^\d+\t", lines[i + 1]):
                found.append(lines[i + 1].replace("\t", "  "))
    return found


def handle(request: dict) -> dict:
    kernel = load_spec(request["spec_path"]).kernel(request["kernel_id"])
    geometry = resolve_geometry(kernel, request.get("block"), request.get("tile"), request.get("params"))
    try:
        launch_once(kernel, geometry, request["source"], tuple(request["shape"]), seed=int(request["seed"]),
                    memory_fraction=float(request.get("memory_fraction", 0.25)), lineinfo=True)
    except Exception as exc:
        if not _is_cuda_error(exc):
            raise
    else:
        return {"lines": [], "why": "the kernel did not fault in this launch"}
    gdb = find_tool("cuda-gdb")
    if gdb is None:
        return {"lines": [], "why": "no cuda-gdb on this GPU worker"}
    if not Path(DUMP).is_file():
        return {"lines": [], "why": "the CUDA driver wrote no core dump"}
    Path(CELL_NAME).write_text(request["source"])   # where cuda-gdb looks for the frame's source line
    try:
        run = subprocess.run([str(gdb), "-batch", "-nx", "-ex", f"target cudacore {DUMP}"], capture_output=True,
                             text=True, timeout=GDB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"lines": [], "why": f"cuda-gdb did not read the core dump within {GDB_TIMEOUT_S:g} s"}
    return {"lines": exception_lines(run.stdout + run.stderr)[:4], "why": "" if run.returncode == 0 else
            f"cuda-gdb ended with status {run.returncode}"}
