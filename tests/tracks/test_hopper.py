"""The Hopper worklog without a GPU: its spec and kind, every reference compiled for sm_90a with the SASS its step
teaches (HGMMA, UTMALDG, SYNCS, USETMAXREG, UTMALDG.MULTICAST, UTMASTG), its registers and shared memory within the
SM's, its tensor maps valid at every shape it is graded at, and each known-wrong solution compiled with the SASS its
expect: line rests on. Whether the kernels are right and fast only the GPU says: tests/gpu/test_hopper_gpu.py."""
from __future__ import annotations

import re
import runpy

import pytest
import torch

from graders import tracks
from graders.cuda_engine import sass
from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.extended_launch import map_fields
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from graders.settings import ROOT
from workshop import targets

TRACK = tracks.get("hopper")
SPEC = load_spec("hopper")
KIND = problem("bf16gemm_kmajor")
ORDER = ["wgmma", "tma", "pipeline", "specialised", "two_consumers", "cluster", "persistent"]
WRONG = {p.name: p for p in TRACK.wrong_solutions()}
# per step: HGMMA instructions in the compiled K loop (four k16 wgmmas a 64-deep slab; step 4's two a k step, one for
# each 64-row half) and TMA copies issued (the pipeline's first fill unrolled)
HGMMA = {"wgmma": 4, "tma": 4, "pipeline": 4, "specialised": 8, "two_consumers": 4, "cluster": 4, "persistent": 4}
UTMALDG = {"wgmma": 0, "tma": 2, "pipeline": 4, "specialised": 2, "two_consumers": 2, "cluster": 2, "persistent": 2}
SPECIALISED = ORDER[3:]
SM_SHARED = 233472        # an H100's or H200's shared memory a SM (228 KiB); a block opts into at most 227 KiB
BLOCK_SHARED = 232448
RESERVED = 1024           # the shared memory the system keeps for each resident block
REGISTER_FILE = 65536     # 32-bit registers an SM

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


def compiled_as(kernel_id: str, source: str):
    kernel = SPEC.kernel(kernel_id)
    return compile_cuda(source, kernels=(kernel.function,), defines=kernel.geometry.defines(), arch=kernel.launch.arch)


@pytest.fixture(scope="module")
def references() -> dict:
    return {kid: compiled_as(kid, k.reference.read_text()) for kid, k in SPEC.kernels.items()}


def test_spec_lists_the_steps_in_order_compiled_for_sm_90a():
    assert list(SPEC.kernels) == ORDER
    assert all(k.kind == "bf16gemm_kmajor" and k.launch.arch == "sm_90a" for k in SPEC.kernels.values())


def test_the_targets_are_0_95_of_the_reference_records_ratios():
    """`workshop targets hopper RECORD --fraction 0.95 --write` wrote them from the record the notebook quotes."""
    record = [ROOT / runpy.run_path(str(ROOT / "tracks/hopper/notebook.py"))["REFERENCE_RECORD"]]
    expected = targets.new_targets(targets.lowest_ratios(record, targets.timed(SPEC)), 0.95)
    assert {kid: k.target for kid, k in SPEC.kernels.items()} == expected


def test_each_step_names_its_sass_requirements_and_launch():
    pipelined = ("wgmma", "tma", "mbarrier")
    assert [k.sass_requirements for k in SPEC.kernels.values()] == [
        ("wgmma",), pipelined, pipelined, (*pipelined, "setmaxnreg"), (*pipelined, "setmaxnreg"),
        (*pipelined, "setmaxnreg", "multicast"), (*pipelined, "setmaxnreg", "multicast", "tma_store")]
    assert all(k.perf_shape == (4096, 4096, 4096) for k in SPEC.kernels.values())
    assert [(k.launch.cluster, k.launch.persistent, k.warp_specialised) for k in SPEC.kernels.values()][3:] == [
        (None, False, True), (None, False, True), ((1, 2), False, True), ((2, 1), True, True)]


@pytest.mark.parametrize("kernel_id", ["pipeline", *SPECIALISED])
def test_the_dynamic_shared_memory_is_the_stages_the_store_buffers_and_the_swizzle_alignment(kernel_id):
    """STAGES tiles of A and B, the persistent step's two consumers' two 8 KiB store buffers, and 1 KiB to align
    the first tile to the 128-byte swizzle's 1024-byte pattern; with the static barriers within what a block may
    opt into, and step 4's two blocks within the SM."""
    kernel = SPEC.kernel(kernel_id)
    d = kernel.geometry.defines()
    stores = 2 * 2 * 32 * 64 * 4 if kernel_id == "persistent" else 0
    smem = kernel.launch.dynamic_smem
    assert smem == d["STAGES"] * (d["TILE_Y"] + d["TILE_X"]) * d["BK"] * 2 + stores + 1024 > 48 * 1024
    static = 2 * d["STAGES"] * 8   # the full and empty barriers
    assert smem + static <= BLOCK_SHARED
    blocks = 2 if kernel_id == "specialised" else 1
    assert blocks * (smem + static + RESERVED) <= SM_SHARED


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
    """Where clusters pair blocks along M (steps 6 and 7), M is a whole number of pairs."""
    for kernel in SPEC.kernels.values():
        d = kernel.geometry.defines()
        pair = 2 if kernel.launch.cluster else 1
        for m, n, k in (*kernel.check_shapes, kernel.perf_shape):
            assert m % (pair * d["TILE_Y"]) == 0 and n % d["TILE_X"] == 0 and k % d["BK"] == 0


def test_the_persistent_step_is_checked_where_clusters_take_several_tiles():
    """An H100 or H200 has 132 SMs: 66 clusters of two. The largest check shape has 90 tiles of 256 x 256, so
    some clusters take two and the barriers' phases run on from one tile to the next; one shape has one tile,
    where most clusters have none."""
    kernel = SPEC.kernel("persistent")
    tiles = [m // 256 * (n // 256) for m, n, _ in kernel.check_shapes]
    assert max(tiles) == 90 > 66 and min(tiles) == 1
    assert max(k for _, _, k in kernel.check_shapes) // 64 > kernel.geometry.defines()["STAGES"]


# each map's box per step (innermost first): A's a BM x 64 tile, B's a BN x 64 tile (half of it where a cluster
# multicasts it), C's 64 rows of 32 fp32; every box row 128 bytes, the 128-byte swizzle's span
BOXES = {"tma": {"A": (64, 64), "B": (64, 128)}, "pipeline": {"A": (64, 64), "B": (64, 128)},
         "specialised": {"A": (64, 128), "B": (64, 128)}, "two_consumers": {"A": (64, 128), "B": (64, 256)},
         "cluster": {"A": (64, 128), "B": (64, 128)},
         "persistent": {"A": (64, 128), "B": (64, 128), "C": (32, 64)}}


@pytest.mark.parametrize("kernel_id", list(BOXES))
def test_the_tensor_maps_encode_at_every_shape(kernel_id):
    """The fields `cuTensorMapEncodeTiled` gets for each map at each shape pass the driver's rules (the encoding
    itself needs the GPU)."""
    kernel = SPEC.kernel(kernel_id)
    assert [m.operand for m in kernel.launch.tensor_maps] == list(BOXES[kernel_id])
    for shape in (*kernel.check_shapes, kernel.perf_shape):
        m, n, k = shape
        tensors = dict(zip("CAB", [torch.empty(m, n), *KIND.make_inputs(shape, torch.Generator().manual_seed(0))]))
        for spec in kernel.launch.tensor_maps:
            t = tensors[spec.operand]
            fields = map_fields(spec, str(t.dtype).removeprefix("torch."), tuple(t.shape), t.stride(),
                                t.element_size(), kernel.geometry.defines())
            dims = {"A": (k, m), "B": (k, n), "C": (n, m)}[spec.operand]
            assert fields.global_dim == dims and fields.global_strides == (dims[0] * t.element_size(),)
            assert fields.box == BOXES[kernel_id][spec.operand] and fields.swizzle == "128B"
            assert fields.box[0] * t.element_size() == 128


@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_compiles_for_sm_90a_without_spills(references, kernel_id):
    usage = references[kernel_id].resources[SPEC.kernel(kernel_id).function]
    assert references[kernel_id].arch == "sm_90a" and usage.spill_stores == usage.spill_loads == 0


def setmaxnreg_counts(text: str) -> tuple[int, int]:
    """The registers a thread the producer keeps (USETMAXREG.DEALLOC) and the consumers claim (.TRY_ALLOC)."""
    found = dict(re.findall(r"USETMAXREG\.(DEALLOC|TRY_ALLOC)\.CTAPOOL (?:UP\d, )?(0x[0-9a-f]+)", text))
    return int(found["DEALLOC"], 16), int(found["TRY_ALLOC"], 16)


def register_budget(compiled, kernel) -> tuple[int, int, int]:
    """(registers a thread the block was compiled for, the registers its warpgroups hold after setmaxnreg, the
    block's pool): one producer warpgroup and the rest consumers."""
    text = sass.disassemble(compiled.cubin)[kernel.function]
    producer, consumer = setmaxnreg_counts(text)
    threads = kernel.geometry.block[0] * kernel.geometry.block[1]
    registers = compiled.resources[kernel.function].registers
    return registers, 128 * (producer + (threads // 128 - 1) * consumer), threads * registers


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", SPECIALISED)
def test_setmaxnreg_moves_registers_within_the_blocks_pool(references, kernel_id):
    """The block is compiled for its __launch_bounds__ (128 registers a thread at two blocks of 256 an SM, 168 at one
    of 384: the register file shared out), the producer keeps fewer and the consumers claim more, and what they
    hold together is exactly the pool: a consumer's setmaxnreg.inc never waits for registers that do not exist."""
    kernel = SPEC.kernel(kernel_id)
    registers, held, pool = register_budget(references[kernel_id], kernel)
    blocks = 2 if kernel_id == "specialised" else 1
    threads = kernel.geometry.block[0]
    assert registers == REGISTER_FILE // (blocks * threads) // 8 * 8 and held == pool
    producer, consumer = setmaxnreg_counts(sass.disassemble(references[kernel_id].cubin)[kernel.function])
    assert producer == 40 < registers < consumer and consumer % 8 == 0


def test_a_missing_wgmma_fence_is_put_back_by_ptxas():
    """Why no known-wrong solution leaves out wgmma.fence: ptxas injects the warpgroup.arrive itself (its info
    C7519) and the SASS is the reference's, so such a kernel is correct."""
    kernel = SPEC.kernel("specialised")
    source = kernel.reference.read_text()
    fenced = compiled_as("specialised", source)
    unfenced = compiled_as("specialised", source.replace("            wgmma_fence();\n", "", 1))
    assert "C7519" in unfenced.log and "warpgroup.arrive is injected" in unfenced.log and "C7519" not in fenced.log
    if sass.find_tool("cuobjdump") and sass.find_tool("nvdisasm"):
        strip = lambda c: re.sub(r"/\*[0-9a-f]{4}\*/", "", sass.disassemble(c.cubin)[kernel.function])
        assert strip(fenced) == strip(unfenced)


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
    assert (sass.opcode_count(text, "UCGABAR_ARV") > 0) == (kernel.launch.cluster is not None)   # barrier.cluster
    assert (sass.opcode_count(text, "STG") == 0) == (kernel_id == "persistent")   # C only through UTMASTG


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
    missing = {"mma_sync_for_wgmma.cu": ["HGMMA"], "sync_loads_for_tma.cu": ["UTMALDG", "SYNCS"],
               "no_setmaxnreg.cu": ["USETMAXREG"], "direct_stores_for_tma_store.cu": ["UTMASTG"]}.get(name, [])
    assert tracks.expected_statuses(path) == (("unmet",) if missing else tracks.expected_statuses(path))
    assert len(failures) == len(missing) and all(m in f for m, f in zip(missing, failures))
    expected = tracks.expected_points(path)[f"{kid}_score"]
    assert expected.matches(kernel.points_correct if missing else 0.0)


def test_without_setmaxnreg_the_consumers_accumulators_spill():
    """no_setmaxnreg.cu: at two blocks of 256 threads an SM every thread has 128 registers, fewer than the
    consumer's 128 accumulators and its addresses: ptxas spills them and serialises the wgmmas (its C7511)."""
    compiled = compiled_as("specialised", WRONG["no_setmaxnreg.cu"].read_text())
    usage = compiled.resources["hopper_specialised"]
    assert usage.registers == 128 and usage.spill_stores > 0 and "C7511" in compiled.log


@needs_sass_tools
def test_setmaxnreg_over_the_pool_asks_more_registers_than_the_block_holds():
    """setmaxnreg_over_the_pool.cu: two consumers at 256 and the producer at 40 hold 70,656 registers of the
    block's 64,512, so the second consumer's setmaxnreg.inc waits for ever (its expect: a timeout)."""
    kernel = SPEC.kernel("two_consumers")
    registers, held, pool = register_budget(compiled_as("two_consumers", WRONG["setmaxnreg_over_the_pool.cu"]
                                                        .read_text()), kernel)
    assert (registers, held, pool) == (168, 70656, 64512)


@needs_sass_tools
def test_a_multicast_to_its_own_block_leaves_the_others_half_of_b_missing():
    """multicast_to_own_block.cu: the B copy is still a multicast, its mask one block, so each full barrier that
    expects both halves of B receives one (its expect: a timeout)."""
    source = WRONG["multicast_to_own_block.cu"].read_text()
    assert "mbarrier_expect_bytes(smem(&full[s]), STAGE_BYTES);" in source and "smem(&full[s]), 1 << rank);" in source
    text = sass.disassemble(compiled_as("cluster", source).cubin)["hopper_cluster"]
    assert sass.opcode_count(text, "UTMALDG") == 2 and "UTMALDG.2D.MULTICAST" in text


@pytest.mark.parametrize("kernel_id, why", [
    ("wgmma", "it uses inline PTX (`setp.ne.b32` in wgmma_m64n128k16), which the CPU preview does not emulate"),
    ("pipeline", "it uses dynamic shared memory (extern __shared__), which the CPU preview does not emulate (the "
                 "grader launches with it where the spec gives dynamic_smem)")])
def test_the_cpu_preview_says_it_cannot_run_a_hopper_kernel(kernel_id, why):
    from graders.cuda_engine import preview
    found = preview.preview("hopper", kernel_id, SPEC.kernel(kernel_id).reference.read_text())
    assert (found.verdict, found.finding) == ("cannot_run", "unsupported")
    assert found.line == f"? {kernel_id}: the CPU preview cannot run this kernel: {why}; the GPU worker grades it"
