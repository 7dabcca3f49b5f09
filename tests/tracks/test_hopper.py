"""The Hopper worklog without a GPU: its spec and kind, every reference compiled for sm_90a with the SASS its step
teaches (HGMMA, UTMALDG, SYNCS), its tensor maps valid at every shape it is graded at, and each known-wrong solution
compiled with the SASS its expect: line rests on. Whether the kernels are right and fast only the GPU says:
tests/gpu/test_hopper_gpu.py."""
from __future__ import annotations

import pytest
import torch

from graders import tracks
from graders.cuda_engine import sass
from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.extended_launch import map_fields
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec

TRACK = tracks.get("hopper")
SPEC = load_spec("hopper")
KIND = problem("bf16gemm_kmajor")
ORDER = ["wgmma", "tma", "pipeline"]
WRONG = {p.name: p for p in TRACK.wrong_solutions()}
# per step: HGMMA instructions in the compiled K loop (four k16 wgmmas a 64-deep slab) and TMA copies issued
HGMMA, UTMALDG = {"wgmma": 4, "tma": 4, "pipeline": 4}, {"wgmma": 0, "tma": 2, "pipeline": 4}

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


def compiled_as(kernel_id: str, source: str):
    kernel = SPEC.kernel(kernel_id)
    return compile_cuda(source, kernels=(kernel.function,), defines=kernel.geometry.defines(), arch=kernel.launch.arch)


@pytest.fixture(scope="module")
def references() -> dict:
    return {kid: compiled_as(kid, k.reference.read_text()) for kid, k in SPEC.kernels.items()}


def test_spec_lists_the_steps_in_order_compiled_for_sm_90a():
    assert list(SPEC.kernels) == ORDER and SPEC.targets == "provisional"
    assert all(k.kind == "bf16gemm_kmajor" and k.launch.arch == "sm_90a" for k in SPEC.kernels.values())
    assert [k.sass_requirements for k in SPEC.kernels.values()] == [("wgmma",), ("wgmma", "tma", "mbarrier"),
                                                                     ("wgmma", "tma", "mbarrier")]
    assert all(k.perf_shape == (4096, 4096, 4096) for k in SPEC.kernels.values())


def test_the_pipelines_dynamic_shared_memory_is_its_stages_and_the_swizzle_alignment():
    kernel = SPEC.kernel("pipeline")
    d = kernel.geometry.defines()
    assert kernel.launch.dynamic_smem == d["STAGES"] * (d["TILE_Y"] + d["TILE_X"]) * d["BK"] * 2 + 1024 > 48 * 1024


def test_the_kind_is_bf16gemm_with_b_column_major():
    assert KIND.signature == problem("bf16gemm").signature and KIND.instruction_probe is None
    assert KIND.sass_requirements == ("tensor_cores",) and KIND.baseline_name == problem("bf16gemm").baseline_name
    a, b = KIND.make_inputs((64, 128, 32), torch.Generator().manual_seed(0))
    assert (a.dtype, b.dtype, tuple(a.shape), tuple(b.shape)) == (torch.bfloat16, torch.bfloat16, (64, 32), (32, 128))
    assert a.stride() == (32, 1) and b.stride() == (1, 32)   # B[k][n] at B[n * K + k]
    for t in (a, b):   # fenced by NaN on both sides, the body finite
        whole = torch.tensor([], dtype=torch.bfloat16).set_(t.untyped_storage())
        assert int(torch.isnan(whole).sum()) == whole.numel() - t.numel() > 0 and not torch.isnan(t).any()
    expected = KIND.reference([a, b])
    assert KIND.compare((a.double() @ b.double()).float(), expected) == ""
    assert KIND.compare(torch.zeros(64, 128), expected) != ""


def test_every_check_shape_is_a_whole_number_of_tiles_and_slabs():
    for kernel in SPEC.kernels.values():
        d = kernel.geometry.defines()
        for m, n, k in (*kernel.check_shapes, kernel.perf_shape):
            assert m % d["TILE_Y"] == 0 and n % d["TILE_X"] == 0 and k % d["BK"] == 0


@pytest.mark.parametrize("kernel_id", ["tma", "pipeline"])
def test_the_tensor_maps_encode_at_every_shape(kernel_id):
    """The fields `cuTensorMapEncodeTiled` gets for each map at each shape pass the driver's rules (the encoding
    itself needs the GPU): A's box is a 64 x 64 tile, B's 64 x 128, each row 128 bytes, the 128-byte swizzle's
    span."""
    kernel = SPEC.kernel(kernel_id)
    names = dict(zip(["C", "A", "B"], range(3)))
    for shape in (*kernel.check_shapes, kernel.perf_shape):
        tensors = [torch.empty(shape[0], shape[1]), *KIND.make_inputs(shape, torch.Generator().manual_seed(0))]
        for spec in kernel.launch.tensor_maps:
            t = tensors[names[spec.operand]]
            fields = map_fields(spec, "bfloat16", tuple(t.shape), t.stride(), t.element_size(),
                                kernel.geometry.defines())
            rows = shape[0] if spec.operand == "A" else shape[1]
            assert fields.global_dim == (shape[2], rows) and fields.global_strides == (2 * shape[2],)
            assert fields.box == ((64, 64) if spec.operand == "A" else (64, 128)) and fields.swizzle == "128B"


@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_compiles_for_sm_90a_without_spills(references, kernel_id):
    usage = references[kernel_id].resources[SPEC.kernel(kernel_id).function]
    assert references[kernel_id].arch == "sm_90a" and usage.spill_stores == usage.spill_loads == 0


def test_wgmma_needs_sm_90a():
    kernel = SPEC.kernel("wgmma")
    with pytest.raises(CompileError, match="not supported on .target 'sm_90'"):
        compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines(),
                     arch="sm_90")


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_sass_shows_what_its_step_teaches(references, kernel_id):
    kernel = SPEC.kernel(kernel_id)
    cubin = references[kernel_id].cubin
    failures, facts = sass.check(cubin, kernel.function, (*KIND.sass_requirements, *kernel.sass_requirements,
                                                          "no_local"))
    assert failures == [] and facts["resources"]["LOCAL"] == 0
    text = sass.disassemble(cubin)[kernel.function]
    assert sass.opcode_count(text, "HGMMA") == HGMMA[kernel_id] and sass.opcode_count(text, "HMMA") == 0
    assert sass.opcode_count(text, "UTMALDG") == UTMALDG[kernel_id]
    assert (sass.opcode_count(text, "LDG") > 0) == (kernel_id == "wgmma")   # TMA steps load nothing themselves


def test_the_compile_error_is_nvrtcs_with_its_line():
    """A kernel typed as host code types it (__nv_bfloat16): NVRTC has no <cuda_bf16.h>."""
    path = WRONG["compile_error.cu"]
    assert tracks.expected_statuses(path) == ("compile_error",)
    with pytest.raises(CompileError, match=r'line \d+: error: identifier "__nv_bfloat16" is undefined'):
        compiled_as(tracks.graded_kernel(path), path.read_text())


@needs_sass_tools
@pytest.mark.parametrize("name", sorted(n for n in WRONG if n != "compile_error.cu"))
def test_known_wrong_solution_compiles_with_the_sass_its_expectation_rests_on(name):
    """An ``unmet`` one is correct but misses exactly the SASS its step asks for (HMMA instead of HGMMA; its own
    loads instead of TMA and mbarriers); the others have the step's SASS and fail when run."""
    path = WRONG[name]
    kid = tracks.graded_kernel(path)
    kernel = SPEC.kernel(kid)
    failures, _ = sass.check(compiled_as(kid, path.read_text()).cubin, kernel.function,
                             (*KIND.sass_requirements, *kernel.sass_requirements))
    missing = {"mma_sync_for_wgmma.cu": ["HGMMA"], "sync_loads_for_tma.cu": ["UTMALDG", "SYNCS"]}.get(name, [])
    assert tracks.expected_statuses(path) == (("unmet",) if missing else tracks.expected_statuses(path))
    assert len(failures) == len(missing) and all(m in f for m, f in zip(missing, failures))
    expected = tracks.expected_points(path)[f"{kid}_score"]
    assert expected.matches(kernel.points_correct if missing else 0.0)


@pytest.mark.parametrize("kernel_id, why", [
    ("wgmma", "it uses inline PTX (`setp.ne.b32` in wgmma_m64n128k16), which the CPU preview does not emulate"),
    ("pipeline", "it uses dynamic shared memory (extern __shared__), which the CPU preview does not emulate (the "
                 "grader launches with it where the spec gives dynamic_smem)")])
def test_the_cpu_preview_says_it_cannot_run_a_hopper_kernel(kernel_id, why):
    from graders.cuda_engine import preview
    found = preview.preview("hopper", kernel_id, SPEC.kernel(kernel_id).reference.read_text())
    assert (found.verdict, found.finding) == ("cannot_run", "unsupported")
    assert found.line == f"? {kernel_id}: the CPU preview cannot run this kernel: {why}; the GPU worker grades it"
