"""Every reference kernel compiles to a cubin with NVRTC on a machine without a GPU; errors are readable."""

import pytest

from graders import tracks
from graders.cuda_engine import compile as _cc
from graders.cuda_engine.compile import CompileError, compile_cuda, header, parse_resources
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.settings import ROOT

SPEC = load_spec("transpose")
_REAL_PROGRAM = _cc.Program
WRONG = tracks.get("transpose").wrong_solutions()


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_compiles_to_a_cubin(kernel_id):
    kernel = SPEC.kernel(kernel_id)
    compiled = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,),
                            defines=kernel.geometry.defines(), arch="sm_90")
    assert compiled.cubin[:4] == b"\x7fELF"
    usage = compiled.resources[kernel.function]
    assert 0 < usage.registers <= 255 and usage.spill_stores == usage.spill_loads == 0


@pytest.mark.parametrize("block, tile", [((32, 8), (32, 32)), ((32, 16), (32, 32)), ((32, 8), (64, 64)),
                                         ((32, 16), (64, 64)), ((32, 32), (32, 32)), ((64, 4), (64, 16))])
def test_best_reference_compiles_for_other_geometries(block, tile):
    kernel = SPEC.kernel("best")
    geometry = resolve_geometry(kernel, block, tile)
    compiled = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,), defines=geometry.defines())
    assert compiled.resources[kernel.function].shared_bytes == 4 * tile[1] * (tile[0] + 1)


def test_shared_memory_padding_shows_in_the_report():
    sizes = {k: compile_cuda(SPEC.kernel(k).reference.read_text(), defines=SPEC.kernel(k).geometry.defines())
             .resources[SPEC.kernel(k).function].shared_bytes for k in ("tiled", "padded")}
    assert sizes == {"tiled": 32 * 32 * 4, "padded": 32 * 33 * 4}


@pytest.mark.parametrize("path", [p for p in WRONG if "compile_error" not in tracks.expected_statuses(p)],
                         ids=lambda p: p.stem)
def test_wrong_solutions_compile(path):
    kernel = SPEC.kernel(tracks.graded_kernel(path))
    compile_cuda(path.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())


def test_compile_error_names_the_line_of_the_students_cell():
    source = (ROOT / "tracks/transpose/solutions/wrong/compile_error.cu").read_text()
    kernel = SPEC.kernel("naive")
    defines = kernel.geometry.defines()
    assert header(defines).count("\n") == len(defines) + 1   # lines the grader puts before the cell
    with pytest.raises(CompileError) as info:
        compile_cuda(source, kernels=(kernel.function,), defines=defines)
    message = str(info.value)
    assert message.startswith("Your CUDA code did not compile:")
    assert 'line 9: error: expected a ";"' in message   # the statement after the missing semicolon
    assert "your_kernel.cu(" not in message and "NVRTC_ERROR" not in message


def test_line_numbers_do_not_depend_on_the_header():
    source = 'extern "C" __global__ void k(float* out)\n{\n    out[0] = undefined_name;\n}\n'
    for defines in ({}, {"A": 1, "B": 2, "C": 3}):
        with pytest.raises(CompileError, match="line 3: error: identifier \"undefined_name\" is undefined"):
            compile_cuda(source, kernels=("k",), defines=defines)


def test_kernel_without_extern_c_gets_a_hint():
    with pytest.raises(CompileError, match=r'`k` lacks extern "C" \(the compiled name is _Z1kPf\)'):
        compile_cuda("__global__ void k(float* out) { out[0] = 1.0f; }", kernels=("k",))


def test_misnamed_kernel_lists_the_kernels_found():
    with pytest.raises(CompileError, match="No kernel named `transpose_naive`; kernels found: transpose"):
        compile_cuda('extern "C" __global__ void transpose(float* o) { o[0] = 1.0f; }',
                     kernels=("transpose_naive",))


def test_parse_resources_reads_spills():
    log = ("ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
           "ptxas info    : Function properties for a\n"
           "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 368 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
           "ptxas info    : Used 8 registers, 368 bytes cmem[0]\n")
    found = parse_resources(log)
    assert found["a"].registers == 255 and found["a"].spill_stores == 8 and found["a"].spill_loads == 12
    assert found["a"].shared_bytes == 8192 and found["a"].stack_bytes == 16
    assert found["b"].registers == 8 and found["b"].shared_bytes == 0
    assert "20 B of spills" in found["a"].summary()


class _SilentProgram:
    """cuda.core's Program, compiling as usual but writing nothing to ``logs`` (NVRTC's cache hit)."""

    def __init__(self, *args, **kwargs):
        self.program = _REAL_PROGRAM(*args, **kwargs)

    def compile(self, target, logs=None, **kwargs):
        return self.program.compile(target, **kwargs)


def test_kernels_are_found_in_the_cubin_when_the_log_is_empty(monkeypatch, capsys):
    from graders.cuda_engine.compile import kernels_in_cubin
    from graders.cuda_engine.grade import check_compiles
    monkeypatch.setattr(_cc, "Program", _SilentProgram)
    kernel = SPEC.kernel("padded")
    compiled = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,),
                            defines=kernel.geometry.defines())
    assert compiled.log == ""
    assert kernels_in_cubin(compiled.cubin) == [kernel.function]
    usage = compiled.resources[kernel.function]
    assert usage.source == "cubin" and 0 < usage.registers <= 255 and usage.stack_bytes == 0
    assert usage.shared_bytes is None and usage.spill_stores is None
    assert usage.summary().endswith("shared memory unknown, spills unknown")
    resources = check_compiles("transpose", "padded", kernel.reference.read_text())
    assert "transpose_padded compiles for" in capsys.readouterr().out
    assert resources["transpose_padded"]["registers"] > 0
    with pytest.raises(CompileError, match=r"\(the compiled name is _Z1kPf\)"):
        compile_cuda("__global__ void k(float* out) { out[0] = 1.0f; }", kernels=("k",))


def test_cubin_registers_agree_with_ptxas():
    from graders.cuda_engine.compile import cubin_resources
    for kid in ("naive", "tiled", "padded", "best"):
        kernel = SPEC.kernel(kid)
        compiled = compile_cuda(kernel.reference.read_text(), defines=kernel.geometry.defines())
        from_cubin = cubin_resources(compiled.cubin)[kernel.function]
        assert compiled.resources[kernel.function].source == "ptxas"
        assert from_cubin.registers == compiled.resources[kernel.function].registers
        assert from_cubin.stack_bytes == compiled.resources[kernel.function].stack_bytes


def test_every_kernel_of_a_source_is_found_mangled_or_not():
    from graders.cuda_engine.compile import kernels_in_cubin
    source = ('extern "C" __global__ void a(float* o) { o[0] = 1.0f; }\n'
              '__global__ void b(float* o) { o[1] = 2.0f; }\n'
              '__device__ __noinline__ float twice(float x) { return 2.0f * x; }\n'
              'extern "C" __global__ void c(float* o) { o[2] = twice(o[3]); }\n')
    assert sorted(kernels_in_cubin(compile_cuda(source).cubin)) == ["_Z1bPf", "a", "c"]
