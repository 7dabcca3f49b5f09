"""The SASS requirements (`graders.cuda_engine.sass`) at their edges, in this process.

Each requirement passes the narrowest SASS that meets it and fails the nearest that does not, with the whole
sentence the student reads; `check` runs on cubins compiled here by NVRTC, and the tools are found and run the
way the grader runs them (a cuobjdump alone in its folder still finds nvdisasm, a hung one is stopped).
"""
import functools
import shutil
import sys
import types
from subprocess import TimeoutExpired

import pytest

from graders.cuda_engine import sass
from graders.cuda_engine.compile import compile_cuda

pytestmark = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                reason="needs cuobjdump and nvdisasm (pip install nvidia-cuda-cuobjdump "
                                       "nvidia-cuda-nvdisasm)")

LDG128, NO_LOCAL, LDS128 = (sass.REQUIREMENTS[r][0] for r in ("ldg128", "no_local", "lds128"))
LOCAL_ADVICE = ("registers spilled, or an array indexed with a value the compiler cannot resolve at compile time. "
                "Unroll loops over register arrays (#pragma unroll with compile-time bounds) or shrink the thread tile")
NOT_LDG128 = ("its global loads are not vectorized: the SASS has no 128-bit global load (LDG.E.128); its global "
              "loads are {}. Load A and B as float4 (reinterpret_cast<const float4*>) from 16-byte-aligned addresses")
NOT_LDS128 = "its shared-memory reads are not vectorized: the SASS has no LDS.128"

TWO_KERNELS = """
extern "C" __global__ void wide(float4* __restrict__ o, const float4* __restrict__ i) { o[threadIdx.x] = i[threadIdx.x]; }
extern "C" __global__ void narrow(float* __restrict__ o, const float* __restrict__ i) { o[threadIdx.x] = i[threadIdx.x]; }
"""
SPILL = """
extern "C" __global__ void spill(float* o, int i, int n)
{ float a[64]; for (int j = 0; j < n; ++j) a[j % 64] = o[j]; o[0] = a[i]; }
"""


def sass_of(*mnemonics: str) -> str:
    """SASS text with one instruction per mnemonic, as cuobjdump prints it."""
    return "".join(f"        /*{16 * n:04x}*/                   {m} R1, [R2] ;   /* 0x00 */\n"
                   for n, m in enumerate(mnemonics))


@functools.cache
def cubin(source: str) -> bytes:
    return compile_cuda(source).cubin


# --- parsing ------------------------------------------------------------------------------------------

def test_memory_op_widths_come_from_the_modifiers():
    text = sass_of("LDG.E.U8", "LDG.E.S8", "LDS.U16", "STS.S16", "LDG.E.64", "LDG.E.128.CONSTANT",
                   "LDG.E.128", "@!P0 STG.E", "FFMA", "BAR.SYNC")
    assert [(op.opcode, op.bits, op.text) for op in sass.memory_ops(text)] == [
        ("LDG", 8, "LDG.E.U8"), ("LDG", 8, "LDG.E.S8"), ("LDS", 16, "LDS.U16"), ("STS", 16, "STS.S16"),
        ("LDG", 64, "LDG.E.64"), ("LDG", 128, "LDG.E.128.CONSTANT"), ("LDG", 128, "LDG.E.128"),
        ("STG", 32, "STG.E")]
    assert sass.op_counts(text) == {"LDG.128": 2, "LDG.64": 1, "LDG.8": 2, "LDS.16": 1, "STG.32": 1, "STS.16": 1}


def test_each_kernel_of_a_cubin_gets_its_own_sass():
    by_kernel = sass.disassemble(cubin(TWO_KERNELS))
    assert sorted(by_kernel) == ["narrow", "wide"]
    assert sass.op_counts(by_kernel["wide"]) == {"LDG.128": 1, "STG.128": 1}
    assert sass.op_counts(by_kernel["narrow"]) == {"LDG.32": 1, "STG.32": 1}


# --- the requirements ---------------------------------------------------------------------------------

def test_one_128_bit_global_load_meets_ldg128():
    assert LDG128(sass_of("LDG.E.64", "LDG.E.128.CONSTANT"), {}) == ""


def test_ldg128_names_the_global_loads_it_found():
    assert LDG128(sass_of("LDG.E", "LDG.E.64", "LDG.E.64", "STG.E.128", "LDS.128"), {}) == NOT_LDG128.format(
        "1 x LDG.32, 2 x LDG.64")
    assert LDG128(sass_of("STG.E.128"), {}) == NOT_LDG128.format("none")


def test_any_local_instruction_or_stack_fails_no_local():
    assert NO_LOCAL(sass_of("LDG.E", "STG.E"), {"STACK": 0, "REG": 40}) == ""
    assert NO_LOCAL(sass_of("LDG.E"), {}) == ""
    assert NO_LOCAL(sass_of("LDL.64"), {}) == (
        f"it uses local memory (1 local load/store instruction(s), a 0-byte stack frame): {LOCAL_ADVICE}")
    assert NO_LOCAL(sass_of("STL", "LDL"), {"STACK": 0}) == (
        f"it uses local memory (2 local load/store instruction(s), a 0-byte stack frame): {LOCAL_ADVICE}")
    assert NO_LOCAL(sass_of("LDG.E"), {"STACK": 8}) == (
        f"it uses local memory (0 local load/store instruction(s), a 8-byte stack frame): {LOCAL_ADVICE}")
    assert NO_LOCAL("", {"STACK": 8}) == f"it uses local memory (a 8-byte stack frame): {LOCAL_ADVICE}"


def test_only_a_128_bit_shared_load_meets_lds128():
    assert LDS128(sass_of("LDS.64", "LDS.128"), {}) == ""
    for text in (sass_of("LDS.64", "LDS"), sass_of("LDG.E.128", "STS.128"), ""):
        assert LDS128(text, {}) == NOT_LDS128


# --- check --------------------------------------------------------------------------------------------

def test_check_reads_the_sass_of_the_named_kernel():
    failures, facts = sass.check(cubin(TWO_KERNELS), "narrow", ("ldg128", "no_local"))
    assert failures == [NOT_LDG128.format("1 x LDG.32")]
    usage = sass.resource_usage(cubin(TWO_KERNELS))
    assert facts == {"memory_ops": {"LDG.32": 1, "STG.32": 1}, "resources": usage["narrow"]}
    assert sass.check(cubin(TWO_KERNELS), "wide", ("ldg128", "lds128")) == (
        [NOT_LDS128], {"memory_ops": {"LDG.128": 1, "STG.128": 1}, "resources": usage["wide"]})
    assert usage["wide"]["STACK"] == 0 and usage["wide"]["REG"] > 0


def test_check_disassembles_for_any_requirement_but_no_local():
    failures, facts = sass.check(cubin(TWO_KERNELS), "wide", ("ldg128",), disassemble_always=False)
    assert failures == [] and facts["memory_ops"] == {"LDG.128": 1, "STG.128": 1}
    failures, facts = sass.check(cubin(TWO_KERNELS), "wide", ("no_local", "lds128"), disassemble_always=False)
    assert failures == [NOT_LDS128]


def test_no_local_alone_reads_only_the_resource_report():
    failures, facts = sass.check(cubin(SPILL), "spill", ("no_local",), disassemble_always=False)
    stack = facts["resources"]["STACK"]
    assert stack > 0 and facts["memory_ops"] == {}
    assert failures == [f"it uses local memory (a {stack}-byte stack frame): {LOCAL_ADVICE}"]
    failures, facts = sass.check(cubin(SPILL), "spill", ("no_local",))
    assert facts["memory_ops"].get("LDL.32", 0) + facts["memory_ops"].get("STL.32", 0) > 0
    assert failures[0].startswith("it uses local memory (") and "local load/store instruction(s)" in failures[0]


def test_check_refuses_unknown_requirements_and_kernels():
    with pytest.raises(ValueError) as info:
        sass.check(cubin(TWO_KERNELS), "wide", ("ldg128", "fast"))
    assert str(info.value) == f"unknown SASS requirement(s) ['fast']; known: {sorted(sass.REQUIREMENTS)}"
    with pytest.raises(ValueError) as info:
        sass.check(cubin(TWO_KERNELS), "sgemm", ("no_local",))
    assert str(info.value) == "no kernel 'sgemm' in the cubin; found ['narrow', 'wide']"


# --- finding and running the tools --------------------------------------------------------------------

def executable(path, mode=0o755):
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """No tool anywhere: no override, no wheel, an empty PATH and no CUDA toolkit folder."""
    for name in ("WORKSHOP_CUOBJDUMP", "WORKSHOP_NVDISASM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sass, "_wheel_bin_dirs", lambda: [])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sass, "CUDA_HOMES", ())
    return tmp_path


def test_override_is_used_when_it_is_a_file(monkeypatch, tmp_path):
    tool = executable(tmp_path / "my-cuobjdump")
    monkeypatch.setenv("WORKSHOP_CUOBJDUMP", str(tool))
    assert sass.find_tool("cuobjdump") == tool


@pytest.mark.parametrize("where", ["wheel", "path", "cuda_home"])
def test_only_an_executable_file_is_found(monkeypatch, no_tools, where):
    folder = no_tools / "bin"
    folder.mkdir()
    if where == "wheel":
        monkeypatch.setattr(sass, "_wheel_bin_dirs", lambda: [folder])
    elif where == "path":
        monkeypatch.setenv("PATH", str(folder))
    else:
        monkeypatch.setattr(sass, "CUDA_HOMES", (str(folder),))
    tool = executable(folder / "cuobjdump", 0o644)
    assert sass.find_tool("cuobjdump") is None
    tool.chmod(0o755)
    assert sass.find_tool("cuobjdump") == tool


def test_missing_tool_says_how_to_get_it(no_tools):
    with pytest.raises(sass.SassToolMissing) as info:
        sass.disassemble(b"")
    assert str(info.value) == ("`cuobjdump` was not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm "
                               "(or set WORKSHOP_CUOBJDUMP to its path)")


def test_wheel_folders_of_every_nvidia_root(monkeypatch, tmp_path):
    for root, package in (("a", "cu13"), ("b", "cuda_nvdisasm")):
        (tmp_path / root / package / "bin").mkdir(parents=True)
    (tmp_path / "a" / "cu13" / "lib").mkdir()
    namespace = types.ModuleType("nvidia")
    namespace.__path__ = [str(tmp_path / "a"), str(tmp_path / "b")]
    monkeypatch.setitem(sys.modules, "nvidia", namespace)
    assert sass._wheel_bin_dirs() == [tmp_path / "a/cu13/bin", tmp_path / "b/cuda_nvdisasm/bin"]
    monkeypatch.setitem(sys.modules, "nvidia", types.ModuleType("nvidia"))   # a module, not a package
    assert sass._wheel_bin_dirs() == []
    monkeypatch.setitem(sys.modules, "nvidia", None)   # not installed
    assert sass._wheel_bin_dirs() == []


def test_cuobjdump_alone_in_its_folder_runs_the_nvdisasm_found(monkeypatch, tmp_path):
    nvdisasm = sass.find_tool("nvdisasm")
    lone = tmp_path / "cuobjdump"
    shutil.copy(sass.find_tool("cuobjdump"), lone)
    monkeypatch.setenv("WORKSHOP_CUOBJDUMP", str(lone))
    monkeypatch.setenv("WORKSHOP_NVDISASM", str(nvdisasm))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert sass.op_counts(sass.disassemble(cubin(TWO_KERNELS))["wide"]) == {"LDG.128": 1, "STG.128": 1}
    monkeypatch.delenv("PATH")
    assert sorted(sass.disassemble(cubin(TWO_KERNELS))) == ["narrow", "wide"]


def test_a_failing_cuobjdump_is_reported_with_its_stderr(monkeypatch, tmp_path):
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!/bin/sh\necho '  bad cubin ' >&2\nexit 3\n")
    tool.chmod(0o755)
    monkeypatch.setenv("WORKSHOP_CUOBJDUMP", str(tool))
    with pytest.raises(RuntimeError) as info:
        sass.resource_usage(b"x")
    assert str(info.value) == "cuobjdump --dump-resource-usage failed (3): bad cubin"


def test_a_hung_cuobjdump_is_stopped(monkeypatch, tmp_path):
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!/bin/sh\nexec sleep 30\n")
    tool.chmod(0o755)
    monkeypatch.setenv("WORKSHOP_CUOBJDUMP", str(tool))
    monkeypatch.setattr(sass, "TOOL_TIMEOUT_S", 0.5)
    with pytest.raises(TimeoutExpired):
        sass.disassemble(b"x")
