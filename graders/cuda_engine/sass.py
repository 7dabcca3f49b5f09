"""What the compiled kernel is made of: its SASS (the GPU's machine code) and resource usage, from a cubin.

Structural checks need no GPU: the grader compiles the student's source to a cubin (`graders.cuda_engine.compile`)
and reads it with NVIDIA's ``cuobjdump`` (which calls ``nvdisasm``). Both come as pip wheels
(``nvidia-cuda-cuobjdump``, ``nvidia-cuda-nvdisasm``, binaries under ``site-packages/nvidia/cu13/bin``);
`find_tool` also looks at ``$WORKSHOP_CUOBJDUMP`` / ``$WORKSHOP_NVDISASM``, ``PATH`` and the CUDA toolkit;
it finds the graders' other NVIDIA tools too (``compute-sanitizer``, ``ncu``).

- `disassemble` gives each kernel's SASS text, `memory_ops` counts its memory instructions by kind and
  width (``LDG.E.128.CONSTANT`` is a 128-bit global load through the read-only path);
- `resource_usage` gives registers, stack, shared and local memory per kernel (``--dump-resource-usage``), and
  the module's static global memory and device-side malloc
  (`graders.cuda_engine.compile.global_memory`, read from the cubin's ELF);
- `tensor_core_ops` counts its tensor-core instructions (HMMA, HGMMA, ...), `opcode_count` any one opcode
  (LDSM: ldmatrix, LDGSTS: cp.async; on sm_90a HGMMA: wgmma, UTMALDG: a TMA tile load (.MULTICAST: into every
  block of a cluster), UTMASTG: a TMA tile store, SYNCS: mbarrier operations, USETMAXREG: setmaxnreg's
  .DEALLOC and .TRY_ALLOC); ``e4m3`` asks for fp8 operands on the tensor cores, which on sm_90
  (no fp8 mma.sync in hardware) are F2FP.F16.E4M3 conversions before fp16 HMMA;
- `ptx_opcodes` lists the instructions of the kernel's PTX, for the one requirement SASS cannot decide
  (``mma_sync``: WMMA and mma.sync compile to the same HMMA and LDSM);
- `check` runs named requirements (`REQUIREMENTS`) and returns the failures as readable sentences.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from graders import settings
from graders.cuda_engine.compile import global_memory

TOOL_TIMEOUT_S = 60
CUDA_HOMES = ("/usr/local/cuda/bin", "/usr/local/cuda-13.0/bin", "/opt/nvidia/cuda/bin")


class SassToolMissing(RuntimeError):
    """cuobjdump or nvdisasm is not installed; the message says how to get it."""


def find_tool(name: str) -> Path | None:
    """``cuobjdump`` or ``nvdisasm``: the env override, the pip wheel, PATH, then the CUDA toolkit."""
    override = settings.tool_override(name)
    if override:
        return Path(override) if Path(override).is_file() else None
    for folder in _wheel_bin_dirs():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    for home in CUDA_HOMES:
        candidate = Path(home) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _wheel_bin_dirs() -> list[Path]:
    """``bin`` folders of the NVIDIA pip wheels (``nvidia/cu13/bin``; older wheels: ``nvidia/<pkg>/bin``)."""
    try:
        import nvidia  # the namespace package the wheels install into
    except ImportError:
        return []
    dirs: list[Path] = []
    for root in map(Path, getattr(nvidia, "__path__", [])):
        dirs += sorted(p for p in root.glob("*/bin") if p.is_dir())
    return dirs


def _tool(name: str) -> Path:
    path = find_tool(name)
    if path is None:
        raise SassToolMissing(f"`{name}` was not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm "
                              f"(or set WORKSHOP_{name.upper()} to its path)")
    return path


def _run_on_cubin(cubin: bytes, *args: str) -> str:
    cuobjdump = _tool("cuobjdump")
    nvdisasm = _tool("nvdisasm")   # cuobjdump -sass runs nvdisasm from PATH
    env = {**os.environ, "PATH": os.pathsep.join([str(nvdisasm.parent), os.environ.get("PATH", "")])}
    with tempfile.TemporaryDirectory(prefix="workshop-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        done = subprocess.run([str(cuobjdump), *args, str(path)], capture_output=True, text=True, env=env,
                              timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"cuobjdump {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.M)


def disassemble(cubin: bytes) -> dict[str, str]:
    """Each kernel's SASS (``cuobjdump -sass``), by function name."""
    text = _run_on_cubin(cubin, "-sass")
    parts = _FUNCTION.split(text)
    return {name: body for name, body in zip(parts[1::2], parts[2::2])}


_RESOURCE = re.compile(r"Function (\S+):\s*\n\s*(.*)")


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """``REG``, ``STACK``, ``SHARED``, ``LOCAL``, ... per kernel, from ``cuobjdump --dump-resource-usage``, and
    the module's ``GLOBAL`` and ``MALLOC`` (`graders.cuda_engine.compile.global_memory`) with each."""
    text = _run_on_cubin(cubin, "--dump-resource-usage")
    module = global_memory(cubin)   # the module's, the same for each kernel
    found = {}
    for name, fields in _RESOURCE.findall(text):
        found[name] = {k: int(v) for k, v in re.findall(r"([A-Z_]+)(?:\[\d+\])?:(\d+)", fields)} | module
    return found



# An instruction: optional predicate (@P0, @!PT), then the opcode with its dot-separated modifiers.
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
MEMORY_OPCODES = ("LDG", "STG", "LDS", "STS", "LDL", "STL", "LD", "ST", "LDGSTS", "ATOMG", "RED")


@dataclass(frozen=True)
class MemoryOp:
    opcode: str      # LDG, STS, ...
    bits: int        # access width per thread: 8, 16, 32, 64, 128
    text: str        # the whole mnemonic, e.g. LDG.E.128.CONSTANT


def memory_ops(sass: str) -> list[MemoryOp]:
    """The memory instructions of one kernel's SASS, in program order."""
    ops = []
    for mnemonic in _INSTRUCTION.findall(sass):
        opcode, *mods = mnemonic.split(".")
        if opcode not in MEMORY_OPCODES:
            continue
        bits = 32
        for mod in mods:
            if mod in ("64", "128"):
                bits = int(mod)
            elif mod in ("U8", "S8"):
                bits = 8
            elif mod in ("U16", "S16"):
                bits = 16
        ops.append(MemoryOp(opcode, bits, mnemonic))
    return ops


def op_counts(sass: str) -> dict[str, int]:
    """How many of each memory instruction, keyed like ``LDG.128`` (opcode and width)."""
    counts: dict[str, int] = {}
    for op in memory_ops(sass):
        key = f"{op.opcode}.{op.bits}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _ldg128(sass: str, usage: dict[str, int]) -> str:
    ops = [op for op in memory_ops(sass) if op.opcode == "LDG"]
    wide = [op for op in ops if op.bits == 128]
    if wide:
        return ""
    widths = ", ".join(f"{n} x {k}" for k, n in op_counts(sass).items() if k.startswith("LDG")) or "none"
    return ("its global loads are not vectorized: the SASS has no 128-bit global load (LDG.E.128); its "
            f"global loads are {widths}. Load A and B as float4 (reinterpret_cast<const float4*>) from "
            "16-byte-aligned addresses")


def _no_local(sass: str, usage: dict[str, int]) -> str:
    local = [op.text for op in memory_ops(sass) if op.opcode in ("LDL", "STL")]
    stack = usage.get("STACK", 0)
    if not local and not stack:
        return ""
    seen = (f"{len(local)} local load/store instruction(s), " if sass else "") + f"a {stack}-byte stack frame"
    return (f"it uses local memory ({seen}): "
            "registers spilled, or an array indexed with a value the compiler cannot resolve at compile time. "
            "Unroll loops over register arrays (#pragma unroll with compile-time bounds) or shrink the thread tile")


def _vector_shared(sass: str, usage: dict[str, int]) -> str:
    if any(op.opcode == "LDS" and op.bits == 128 for op in memory_ops(sass)):
        return ""
    return "its shared-memory reads are not vectorized: the SASS has no LDS.128"


# Tensor-core instructions: warp-level MMA (Volta to Blackwell), Hopper's warpgroup MMA (wgmma) and
# Blackwell's tcgen05 MMA.
TENSOR_CORE_OPCODES = ("HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA",
                       "UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA")


def tensor_core_ops(sass: str) -> dict[str, int]:
    """How many of each tensor-core instruction (by opcode) the SASS holds."""
    counts: dict[str, int] = {}
    for mnemonic in _INSTRUCTION.findall(sass):
        opcode = mnemonic.split(".")[0]
        if opcode in TENSOR_CORE_OPCODES:
            counts[opcode] = counts.get(opcode, 0) + 1
    return dict(sorted(counts.items()))


def _no_tensor_cores(sass: str, usage: dict[str, int]) -> str:
    found = tensor_core_ops(sass)
    if not found:
        return ""
    listed = ", ".join(f"{n} x {op}" for op, n in found.items())
    return (f"it uses tensor cores ({listed} in its SASS): this step is about the FP32 pipes (FFMA), so "
            "TF32, 3xTF32 or other MMA tricks do not count here; they are the tensor-core track's subject")


def _tensor_cores(sass: str, usage: dict[str, int]) -> str:
    if tensor_core_ops(sass):
        return ""
    return ("it does not use tensor cores: its SASS has no tensor-core instruction (HMMA, HGMMA, ...), so its "
            "products run on the FP32 pipes. Multiply with wmma or mma.sync")


def opcode_count(sass: str, opcode: str) -> int:
    """How many instructions of ``opcode`` (the mnemonic before its first dot, e.g. LDSM) the SASS holds."""
    return sum(1 for mnemonic in _INSTRUCTION.findall(sass) if mnemonic.split(".")[0] == opcode)


SCRATCH_BYTES = 1 << 20   # more __device__ memory than this is a buffer of intermediates, not a flag or a counter


def _no_global_scratch(sass: str, usage: dict[str, int]) -> str:
    found = []
    if usage.get("GLOBAL", 0) > SCRATCH_BYTES:
        found.append(f"{usage['GLOBAL']:,} bytes of __device__ variables")
    if usage.get("MALLOC"):
        found.append("device-side malloc")
    if not found:
        return ""
    return (f"it keeps intermediate results in global memory ({' and '.join(found)}): this step forbids "
            "materialising them, such as attention's scores S = Q K^T, in global memory. Keep each tile's scores "
            "in registers or shared memory and fold them into the output with the online softmax")


def _ldsm(sass: str, usage: dict[str, int]) -> str:
    if opcode_count(sass, "LDSM"):
        return ""
    return ("its fragments are not loaded with ldmatrix: the SASS has no LDSM. Load each fragment from shared "
            "memory with ldmatrix.sync.aligned (.trans for B)")


def _ldgsts(sass: str, usage: dict[str, int]) -> str:
    if opcode_count(sass, "LDGSTS"):
        return ""
    return ("its tiles are not copied with cp.async: the SASS has no LDGSTS (global to shared without passing "
            "through registers). Copy each 16-byte chunk with cp.async.cg.shared.global")


# an fp8 tensor-core instruction with e4m3 operands, its shape included (QGMMA.64x16x32.F32.E4M3.E4M3)
_E4M3_MMA = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?(?:QMMA|QGMMA|UTCQMMA)\.\S*\bE4M3\b")


def _e4m3(sass: str, usage: dict[str, int]) -> str:
    if _E4M3_MMA.search(sass):
        return ""   # sm_89 and sm_120: QMMA.16832.F32.E4M3.E4M3; sm_90a's wgmma: QGMMA
    if tensor_core_ops(sass).get("HMMA") and any(m.startswith("F2FP.F16.E4M3.") for m in _INSTRUCTION.findall(sass)):
        return ""   # sm_90 and sm_100: mma.sync .e4m3 becomes fp16 pairs (F2FP.F16.E4M3.UNPACK_B) and fp16 HMMA
    return ("its SASS shows no e4m3 operands reaching the tensor cores: no QMMA .E4M3, and no F2FP.F16.E4M3 "
            "conversion feeding HMMA (what sm_90, whose mma.sync has no fp8 path, makes of mma.sync .e4m3). "
            "Multiply with mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")


WARPGROUP_MMA_OPCODES = ("HGMMA", "QGMMA", "IGMMA", "BGMMA")   # sm_90a's wgmma: fp16/bf16/tf32, fp8, int8, binary


def _wgmma(sass: str, usage: dict[str, int]) -> str:
    if any(opcode_count(sass, op) for op in WARPGROUP_MMA_OPCODES):
        return ""
    found = ", ".join(f"{n} x {op}" for op, n in tensor_core_ops(sass).items()) or "no tensor-core instruction"
    return (f"its products are not warpgroup MMAs: the SASS has no HGMMA or QGMMA (wgmma.mma_async, sm_90a), only "
            f"{found}. Multiply with wgmma.mma_async from shared-memory descriptors")


def _tma(sass: str, usage: dict[str, int]) -> str:
    if opcode_count(sass, "UTMALDG"):
        return ""
    return ("its tiles are not loaded by the tensor memory accelerator: the SASS has no UTMALDG. Copy each tile "
            "with cp.async.bulk.tensor from the tensor map the grader passes")


def _mbarrier(sass: str, usage: dict[str, int]) -> str:
    if opcode_count(sass, "SYNCS"):
        return ""
    return ("it waits on no mbarrier: the SASS has no SYNCS. Complete each copy on an mbarrier "
            "(mbarrier.arrive.expect_tx, then mbarrier.try_wait.parity)")


def _mnemonics(sass: str, opcode: str) -> list[str]:
    """The full mnemonics (``UTMALDG.2D.MULTICAST``) of the SASS's instructions of ``opcode``."""
    return [m for m in _INSTRUCTION.findall(sass) if m.split(".")[0] == opcode]


def _setmaxnreg(sass: str, usage: dict[str, int]) -> str:
    actions = {m.split(".")[1] for m in _mnemonics(sass, "USETMAXREG") if "." in m}
    if "DEALLOC" in actions and actions & {"ALLOC", "TRY_ALLOC"}:
        return ""
    return ("its warpgroups do not move registers: the SASS lacks a USETMAXREG that releases registers "
            "(setmaxnreg.dec, the producer's) and one that claims them (setmaxnreg.inc, the consumers')")


def _multicast(sass: str, usage: dict[str, int]) -> str:
    if any(".MULTICAST" in m for m in _mnemonics(sass, "UTMALDG")):
        return ""
    return ("no tile is multicast to the blocks of a cluster: the SASS has no UTMALDG.MULTICAST. Copy a tile the "
            "cluster's blocks share with cp.async.bulk.tensor ... .multicast::cluster and a ctaMask")


def _tma_store(sass: str, usage: dict[str, int]) -> str:
    if opcode_count(sass, "UTMASTG"):
        return ""
    return ("its tile of C is not stored by the tensor memory accelerator: the SASS has no UTMASTG. Stage the "
            "tile in shared memory and store it with cp.async.bulk.tensor from C's tensor map")


_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PTX_PREFIX = re.compile(r"^(?:[$\w]+:\s*)?(?:@!?%?\w+\s+)?")   # a label, then a predicate
_PTX_MNEMONIC = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)*")


def ptx_opcodes(ptx: str) -> set[str]:
    """Every instruction mnemonic (with its modifiers, e.g. ``mma.sync.aligned.m16n8k16.row.col...``) in PTX
    text, inline assembly included."""
    found = set()
    for statement in re.split(r"[;\n]", _PTX_COMMENT.sub("", ptx)):
        words = _PTX_PREFIX.sub("", statement.strip(" \t{}")).split()
        if words and _PTX_MNEMONIC.fullmatch(words[0]):
            found.add(words[0])
    return found


def _mma_sync(ptx: str, usage: dict[str, int]) -> str:
    opcodes = ptx_opcodes(ptx)
    wmma = sorted({".".join(op.split(".")[:2]) for op in opcodes if op.startswith("wmma.")})
    if wmma:
        return (f"it uses WMMA ({', '.join(wmma)} in its PTX): this step asks for mma.sync, with fragments you "
                "load (ldmatrix) and lay out yourself")
    if not any(op.startswith("mma.sync") for op in opcodes):
        return "its PTX has no mma.sync: multiply with mma.sync.aligned.m16n8k16 (inline PTX)"
    return ""


REQUIREMENTS = {
    "ldg128": (_ldg128, "128-bit global loads (LDG.E.128)"),
    "no_local": (_no_local, "no register spills or other local memory"),
    "lds128": (_vector_shared, "128-bit shared-memory loads (LDS.128)"),
    "no_tensor_cores": (_no_tensor_cores, "FP32 pipes only: no tensor-core instructions (HMMA, HGMMA, ...)"),
    "tensor_cores": (_tensor_cores, "tensor-core instructions (HMMA, HGMMA, ...)"),
    "ldsm": (_ldsm, "fragments loaded with ldmatrix (LDSM)"),
    "ldgsts": (_ldgsts, "asynchronous global-to-shared copies (cp.async, LDGSTS)"),
    "e4m3": (_e4m3, "e4m3 operands on the tensor cores (QMMA .E4M3; on sm_90, F2FP.F16.E4M3 conversions and fp16 "
                    "HMMA)"),
    "mma_sync": (_mma_sync, "tensor-core products through mma.sync, not WMMA (read from the PTX)"),
    "wgmma": (_wgmma, "warpgroup MMAs from shared memory (wgmma, HGMMA)"),
    "tma": (_tma, "tiles loaded by the tensor memory accelerator (cp.async.bulk.tensor, UTMALDG)"),
    "mbarrier": (_mbarrier, "copies completed on an mbarrier (SYNCS)"),
    "setmaxnreg": (_setmaxnreg, "registers moved between warpgroups (setmaxnreg.dec and .inc, USETMAXREG)"),
    "multicast": (_multicast, "tiles multicast to a cluster's blocks (UTMALDG.MULTICAST)"),
    "tma_store": (_tma_store, "C stored by the tensor memory accelerator (cp.async.bulk.tensor, UTMASTG)"),
    "no_global_scratch": (_no_global_scratch, "no intermediates in global memory: at most 1 MiB of `__device__` "
                                              "variables, no device-side malloc"),
}
READS_PTX = {"mma_sync"}   # requirements checked on the kernel's PTX (`check`'s ``ptx``) rather than its SASS
READS_USAGE = {"no_local", "no_global_scratch"}   # requirements that need only the resource report


def check(cubin: bytes, function: str, requirements: list[str] | tuple[str, ...], *,
          disassemble_always: bool = True, ptx: str | None = None) -> tuple[list[str], dict]:
    """(failures, facts) for ``function`` in ``cubin``: one sentence per unmet requirement, and the counts.

    Those of `READS_USAGE` need only the resource report (milliseconds); the others read the SASS (about a
    second, nvdisasm), which ``disassemble_always`` also does for the memory-instruction counts. Those of
    `READS_PTX` read ``ptx``, the source compiled to PTX (`graders.cuda_engine.compile.compile_ptx`)."""
    unknown = [r for r in requirements if r not in REQUIREMENTS]
    if unknown:
        raise ValueError(f"unknown SASS requirement(s) {unknown}; known: {sorted(REQUIREMENTS)}")
    usage_by_kernel = resource_usage(cubin)
    if function not in usage_by_kernel:
        raise ValueError(f"no kernel {function!r} in the cubin; found {sorted(usage_by_kernel)}")
    usage = usage_by_kernel[function]
    text = ""
    if disassemble_always or any(r not in READS_USAGE and r not in READS_PTX for r in requirements):
        text = disassemble(cubin)[function]
    if ptx is None and READS_PTX & set(requirements):
        raise ValueError(f"requirement(s) {sorted(READS_PTX & set(requirements))} need the kernel's PTX")
    failures = [msg for msg in (REQUIREMENTS[r][0](ptx if r in READS_PTX else text, usage) for r in requirements)
                if msg]
    return failures, {"memory_ops": op_counts(text), "resources": usage}
