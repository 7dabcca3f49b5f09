"""The compiler front end (`graders.cuda_engine.compile`) at its edges, with NVRTC and no GPU.

How NVRTC is driven (``--no-cache`` first, a fallback where it is not known), how its messages and ptxas's
report are read, and how the cubin's ELF is read when the report is missing: each with the exact result.
"""
import struct

import pytest

from graders.cuda_engine import compile as cc
from graders.cuda_engine.compile import (
    UNKNOWN,
    CompileError,
    Resources,
    compile_cuda,
    cubin_resources,
    kernels_in_cubin,
    missing_kernel_message,
    parse_resources,
    readable_error,
    resources_for,
    resources_summary,
)

THREE = ('extern "C" __global__ void kern_a(float* o) { o[0] = 1.0f; }\n'
         '__global__ void b(float* o) { o[1] = 2.0f; }\n'
         '__device__ __noinline__ float twice(float x) { return 2.0f * x; }\n'
         'extern "C" __global__ void c(float* o) { o[2] = twice(o[3]); }\n')
ONE = 'extern "C" __global__ void k(float* o) { o[0] = 1.0f; }'
REAL_PROGRAM, REAL_OPTIONS = cc.Program, cc.ProgramOptions


# --- driving NVRTC ------------------------------------------------------------------------------------

def test_compiled_keeps_arch_log_and_object_code():
    compiled = compile_cuda(ONE, arch="sm_90")
    assert compiled.arch == "sm_90" and compiled.object_code is not None
    assert "ptxas info    : Used" in compiled.log
    assert "\x00" not in compiled.log and compiled.log.endswith(" ms\n")   # NVRTC ends its log with NULs


def test_nvrtc_is_asked_not_to_cache(monkeypatch):
    asked = []

    def program(text, language, options):
        asked.append(options.no_cache)
        return REAL_PROGRAM(text, language, options=options)

    monkeypatch.setattr(cc, "Program", program)
    compile_cuda(ONE)
    assert asked == [True]


def test_a_cuda_core_without_no_cache_compiles_without_it(monkeypatch):
    def options(**kwargs):
        if "no_cache" in kwargs:
            raise TypeError("unexpected keyword argument 'no_cache'")
        return REAL_OPTIONS(**kwargs)

    monkeypatch.setattr(cc, "ProgramOptions", options)
    assert compile_cuda(ONE, kernels=("k",)).resources["k"].registers > 0


def test_an_nvrtc_without_no_cache_compiles_without_it(monkeypatch):
    asked = []

    def program(text, language, options):
        asked.append(options.no_cache)
        if options.no_cache:
            raise RuntimeError("NVRTC_ERROR_INVALID_OPTION: unknown option --no-cache")
        return REAL_PROGRAM(text, language, options=options)

    monkeypatch.setattr(cc, "Program", program)
    assert compile_cuda(ONE, kernels=("k",)).resources["k"].source == "ptxas"
    assert asked == [True, None]


def test_an_invalid_option_that_is_not_no_cache_is_raised():
    with pytest.raises(Exception, match="NVRTC_ERROR_INVALID_OPTION") as info:
        compile_cuda(ONE, arch="sm_01")
    assert not isinstance(info.value, CompileError)


# --- NVRTC's messages ---------------------------------------------------------------------------------

def test_readable_error_keeps_only_the_diagnostics():
    message = ('NVRTC_ERROR_COMPILATION, compilation log:\n\nyour_kernel.cu(3): error: "compilation log:" '
               'is not a type\nX is undefined\n  your_kernel.cu(4): note: here\n\n'
               '2 errors detected in the compilation of "your_kernel.cu".\n\x00\x00')
    assert readable_error(message) == ('Your CUDA code did not compile:\nline 3: error: "compilation log:" is not '
                                       'a type\nX is undefined\n  your_kernel.cu(4): note: here')


def test_readable_error_of_a_message_without_a_log():
    assert readable_error("XID out of memory X") == "Your CUDA code did not compile:\nXID out of memory X"


def test_missing_kernel_lists_every_kernel_found_or_none():
    assert missing_kernel_message("k", ["a", "b"]) == (
        'No kernel named `k`; kernels found: a, b. Declare it as: extern "C" __global__ void k(...)')
    assert missing_kernel_message("k", []) == (
        'No kernel named `k`; kernels found: none. Declare it as: extern "C" __global__ void k(...)')


# --- ptxas's report -----------------------------------------------------------------------------------

def test_a_kernel_the_report_says_nothing_about_uses_nothing():
    log = ("ptxas info    : Compiling entry function 'bare' for 'sm_90'\n"
           "ptxas info    : Compiling entry function 'full' for 'sm_90'\n"
           "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 40 registers, 1024 bytes smem\n")
    assert parse_resources(log) == {"bare": Resources(0, 0, 0, 0, 0), "full": Resources(40, 1024, 16, 8, 12)}


@pytest.mark.parametrize("fields, words", [
    ({"registers": 40, "shared_bytes": 1024, "spill_stores": 0, "spill_loads": 0},
     "40 registers, 1024 B shared memory, no spills"),
    ({"registers": 0, "shared_bytes": 0, "spill_stores": 4, "spill_loads": 0},
     "0 registers, 0 B shared memory, 4 B of spills"),
    ({"registers": None, "shared_bytes": None, "spill_stores": 0, "spill_loads": 0},
     "registers unknown, shared memory unknown, no spills"),
    ({"registers": 8, "shared_bytes": 0, "spill_stores": 0, "spill_loads": None},
     "8 registers, 0 B shared memory, spills unknown"),
    ({"registers": 8, "shared_bytes": 0, "spill_stores": None, "spill_loads": 0},
     "8 registers, 0 B shared memory, spills unknown"),
    ({}, "registers unknown, shared memory unknown, spills unknown"),
])
def test_resources_summary_says_what_is_unknown(fields, words):
    assert resources_summary(fields) == words


def test_resources_of_every_kernel_come_from_the_report_or_the_cubin():
    compiled = compile_cuda(THREE)
    kernels = sorted(kernels_in_cubin(compiled.cubin))
    assert kernels == ["_Z1bPf", "c", "kern_a"]
    assert sorted(compiled.resources) == kernels and {r.source for r in compiled.resources.values()} == {"ptxas"}
    log = "ptxas info    : Compiling entry function 'c' for 'sm_90'\nptxas info    : Used 77 registers\n"
    mixed = resources_for(kernels, log, compiled.cubin)
    assert mixed == {"_Z1bPf": cubin_resources(compiled.cubin)["_Z1bPf"], "c": Resources(77, 0, 0, 0, 0),
                     "kern_a": cubin_resources(compiled.cubin)["kern_a"]}
    assert mixed["kern_a"].source == "cubin"
    assert resources_for(["k"], "", b"not a cubin") == {"k": UNKNOWN}
    assert resources_for(["gone"], "", compiled.cubin) == {"gone": UNKNOWN}


# --- the cubin's ELF ----------------------------------------------------------------------------------

def sections(cubin: bytes) -> dict[str, tuple[int, int, int]]:
    """Section name -> (header offset, data offset, data size), read independently of the grader."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [shoff + i * shentsize for i in range(shnum)]
    names_at, = struct.unpack_from("<Q", cubin, headers[shstrndx] + 24)
    found = {}
    for h in headers:
        name, = struct.unpack_from("<I", cubin, h)
        offset, size = struct.unpack_from("<QQ", cubin, h + 24)
        start = names_at + name
        found[cubin[start:cubin.index(b"\0", start)].decode()] = (h, offset, size)
    return found


def test_cubin_resources_are_those_of_the_entry_functions_only():
    cubin = compile_cuda(THREE).cubin
    assert sorted(cubin_resources(cubin)) == ["_Z1bPf", "c", "kern_a"]
    assert all(r.source == "cubin" and r.registers > 0 and r.stack_bytes == 0 and r.shared_bytes is None
               for r in cubin_resources(cubin).values())


def test_nv_info_entries_of_every_format_are_stepped_over():
    """.nv.info rewritten at the end of the file with an entry of each format (2, 4, 4 and 4 + length bytes)
    around the real ones, and a 12-byte register count that is not the 8-byte (index, value) pair."""
    cubin = compile_cuda(ONE).cubin
    header, offset, size = sections(cubin)[".nv.info"]
    real = cubin[offset:offset + size]
    index, = struct.unpack_from("<I", real, 4)
    # the values of the 4-byte entries read as the start of a register count entry: a wrong step lands there
    payload = (bytes([1, 0x04]) + bytes([2, 0x04, 4, 0x2F]) + bytes([3, 0x1B, 4, 0x11])
               + bytes([4, 0x17, 4, 0]) + struct.pack("<I", 7) + real
               + bytes([4, 0x2F, 12, 0]) + struct.pack("<III", index, 999, 0) + bytes([1, 0x04]))
    patched = bytearray(cubin + payload)
    struct.pack_into("<QQ", patched, header + 24, len(cubin), len(payload))
    assert cubin_resources(bytes(patched)) == cubin_resources(cubin)
    assert cubin_resources(cubin)["k"].registers == compile_cuda(ONE).resources["k"].registers


@pytest.mark.parametrize("at, value", [(0, 0), (4, 1), (5, 2)])
def test_only_a_64_bit_little_endian_elf_is_read(at, value):
    cubin = bytearray(compile_cuda(ONE).cubin)
    cubin[at] = value
    with pytest.raises(ValueError) as info:
        kernels_in_cubin(bytes(cubin))
    assert str(info.value) == "not a 64-bit little-endian ELF"


def test_a_name_that_is_not_utf8_is_still_read():
    cubin = bytearray(compile_cuda(THREE).cubin)
    _, offset, size = sections(bytes(cubin))[".strtab"]
    cubin[cubin.index(b"\0kern_a\0", offset, offset + size) + 1] = 0xFF   # the symbol's own name
    assert "\ufffdern_a" in kernels_in_cubin(bytes(cubin))
