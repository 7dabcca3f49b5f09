"""The tensor-core worklog without a GPU: the spec, the bf16gemm kind and its tolerance at its edges, every
reference compiled for sm_90 with the SASS its step teaches, the known-wrong solutions' structural points."""
from __future__ import annotations

import pytest
import torch

from graders import tracks
from graders.cuda_engine import sass
from graders.cuda_engine.compile import compile_cuda
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.structure import check_sass, load_structure

TRACK = tracks.get("tensorcores")
KIND = TRACK.problem_module()
SPEC = load_spec("tensorcores")
STRUCTURE_CHECKS = load_structure("tensorcores").checks
WRONG = TRACK.wrong_solutions()
ORDER = ["wmma", "wmma_smem", "mma", "swizzle", "pipeline", "warptiling", "fp16", "tf32"]
# what each step's SASS must hold beyond HMMA and no local memory: ldmatrix from step 3, cp.async from step 5
TAUGHT = {"wmma": (), "wmma_smem": (), "mma": ("ldsm",), "swizzle": ("ldsm",), "pipeline": ("ldsm", "ldgsts"),
          "warptiling": ("ldsm", "ldgsts"), "fp16": ("ldsm", "ldgsts"), "tf32": ("ldgsts",)}

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


# --- spec and problem ---------------------------------------------------------------------------------

def test_spec_lists_the_six_steps_and_the_precision_menu_in_order():
    assert list(SPEC.kernels) == ORDER
    assert [k.reference.name for k in SPEC.kernels.values()] == [f"{kid}.cu" for kid in ORDER]
    assert [k.kind for k in SPEC.kernels.values()] == ["bf16gemm"] * 6 + ["f16gemm", "tf32gemm"]
    assert all(k.perf_shape == (4096, 4096, 4096) for k in SPEC.kernels.values())
    assert SPEC.targets == "provisional" and SPEC.requires_gpu
    assert SPEC.kernel("swizzle").counter.relative_to == "mma"


def test_check_shapes_are_multiples_of_each_tile():
    for kid, kernel in SPEC.kernels.items():
        tile_x, tile_y = kernel.geometry.tile
        depth = dict(kernel.geometry.params).get("BK", 16)
        assert all(m % tile_y == 0 and n % tile_x == 0 and k % depth == 0 for m, n, k in kernel.check_shapes), kid
        assert any(m != n for m, n, _ in kernel.check_shapes), kid


@pytest.mark.parametrize("name, c_type", [("bf16gemm", "bf16"), ("f16gemm", "f16"), ("tf32gemm", "float")])
def test_problem_kinds(name, c_type):
    kind = problem(name)
    assert kind.work((4096, 4096, 4096)) == 2 * 4096 ** 3 and kind.work_unit == "FLOP"
    assert kind.grid((640, 128, 1056), (64, 64)) == (2, 10, 1)
    assert kind.roof is None                       # the FP32 peak does not bound tensor cores
    assert kind.sass_requirements == ("tensor_cores",)
    assert kind.signature == f"(float* C, const {c_type}* A, const {c_type}* B, int M, int N, int K)"


@pytest.mark.parametrize("name, dtype", [("bf16gemm", torch.bfloat16), ("f16gemm", torch.float16),
                                         ("tf32gemm", torch.float32)])
def test_inputs_are_of_the_kinds_dtype_and_fenced_with_nan(name, dtype):
    a, b = problem(name).make_inputs((48, 32, 16), torch.Generator().manual_seed(1))
    assert a.dtype == b.dtype == dtype and a.shape == (48, 16) and b.shape == (16, 32)
    for t in (a, b):
        base = t.untyped_storage()
        whole = torch.tensor([], dtype=dtype).set_(base)
        assert torch.isnan(whole[:KIND.INPUT_GUARD]).all() and torch.isnan(whole[-KIND.INPUT_GUARD:]).all()
        assert not torch.isnan(t).any()


# --- the tolerance -------------------------------------------------------------------------------------

def _case(m: int, n: int, k: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(k, n, generator=gen).bfloat16()
    return a, b, KIND._reference([a, b])


def _accumulated(a, b, chunk: int, rounding) -> torch.Tensor:
    """C summed chunk by chunk of K (each chunk's sum exact), the running sum rounded by ``rounding``."""
    a, b = a.double(), b.double()
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for k0 in range(0, a.shape[1], chunk):
        acc = rounding(acc + a[:, k0:k0 + chunk] @ b[k0:k0 + chunk])
    return acc.float()


def _to_fp32_toward_zero(x: torch.Tensor) -> torch.Tensor:
    f = x.float()
    return torch.where(f.double().abs() > x.abs(), torch.nextafter(f, torch.zeros_like(f)), f).double()


@pytest.mark.parametrize("chunk", [1, 16], ids=["per-element", "per-k16"])
@pytest.mark.parametrize("rounding", ["nearest", "toward-zero"])
def test_fp32_accumulation_passes_at_k_4096(chunk, rounding):
    """An fp32 accumulator passes whether it rounds or truncates (as tensor cores may), per product or per
    16-deep MMA; measured here: relative Frobenius error at most 1.6e-5 (truncating each product), under 1e-4."""
    a, b, expected = _case(64, 64, 4096)
    round_fn = (lambda x: x.float().double()) if rounding == "nearest" else _to_fp32_toward_zero
    assert KIND.products_mismatch(_accumulated(a, b, chunk, round_fn), expected) == ""


@pytest.mark.parametrize("k", [32, 1024, 4096])
def test_fp16_accumulation_is_rejected(k):
    """The fp16_accumulate known-wrong kernel's arithmetic: each 32-deep slab summed in fp32, the running sum
    kept in fp16."""
    a, b, expected = _case(64, 64, k)
    why = KIND.products_mismatch(_accumulated(a, b, 32, lambda x: x.half().double()), expected)
    assert "relative Frobenius error" in why and "(allowed 0.0001)" in why


def test_bf16_output_is_rejected():
    a, b, expected = _case(64, 64, 1024)
    assert "relative Frobenius error" in KIND.products_mismatch(expected.c.bfloat16().float(), expected)


@pytest.mark.parametrize("factor, ok", [(0.9, True), (1.1, False)])
def test_element_bound_edge(factor, ok):
    a, b, expected = _case(64, 96, 256)
    out = expected.c.float().clone()
    bound = float(KIND.element_bound(256) * (a.double().abs() @ b.double().abs())[5, 7])
    out[5, 7] = float(expected.c[5, 7]) + factor * bound
    why = KIND.products_mismatch(out, expected)
    assert (why == "") == ok, why
    if not ok:
        assert "1 of 6144 values outside the fp32-accumulation tolerance; first at C[5][7]" in why


@pytest.mark.parametrize("factor, ok", [(0.9, True), (1.1, False)])
def test_frobenius_edge(factor, ok):
    a, b, expected = _case(64, 96, 1024)
    out = (expected.c * (1 + factor * KIND.FROBENIUS_RTOL)).float()
    why = KIND.products_mismatch(out, expected)
    assert (why == "") == ok, why


def test_nan_and_wrong_tiles_fail():
    a, b, expected = _case(64, 64, 64)
    out = expected.c.float().clone()
    out[3, 4] = float("nan")
    assert "1 of 4096 values are NaN" in KIND.products_mismatch(out, expected)
    skipped = _accumulated(a[:, :48], b[:48], 16, lambda x: x)   # the last 16-deep tile of K skipped
    assert "outside the fp32-accumulation tolerance" in KIND.products_mismatch(skipped, expected)
    assert "outside" in KIND.products_mismatch(expected.c.float().T.contiguous(), expected)


# --- compiled code ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compiled() -> dict:
    found = {}
    for kid, kernel in SPEC.kernels.items():
        done = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,),
                            defines=kernel.geometry.defines(), arch="sm_90")
        found[kid] = done
    return found


@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_compiles_for_sm_90_without_spills(compiled, kernel_id):
    r = compiled[kernel_id].resources[SPEC.kernel(kernel_id).function]
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0
    assert r.registers <= 255


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_sass_shows_what_its_step_teaches(compiled, kernel_id):
    function = SPEC.kernel(kernel_id).function
    failures, _ = sass.check(compiled[kernel_id].cubin, function, ("tensor_cores", "no_local", *TAUGHT[kernel_id]))
    assert failures == []
    text = sass.disassemble(compiled[kernel_id].cubin)[function]
    assert sass.tensor_core_ops(text).get("HMMA", 0) >= 8
    if "ldsm" not in TAUGHT[kernel_id] and kernel_id == "wmma":
        assert sass.opcode_count(text, "LDSM") == 0            # step 1 reads global memory only
    if kernel_id == "tf32":
        assert sass.opcode_count(text, "LDSM") == 0             # ldmatrix moves 16-bit values; TF32 reads LDS.32
    if "ldgsts" not in TAUGHT[kernel_id]:
        assert sass.opcode_count(text, "LDGSTS") == 0


@needs_sass_tools
@pytest.mark.parametrize("check_id", sorted(STRUCTURE_CHECKS))
def test_every_structural_check_passes_its_reference(check_id, capsys):
    check = STRUCTURE_CHECKS[check_id]
    assert check_sass("tensorcores", check_id, SPEC.kernel(check.kernel).reference.read_text()) == check.points
    assert f"{check_id}: ok" in capsys.readouterr().out


@needs_sass_tools
def test_fp32_kernel_misses_the_tensor_core_requirement():
    path = TRACK.solutions / "wrong" / "fp32_simt.cu"
    kernel = SPEC.kernel("wmma")
    done = compile_cuda(path.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())
    failures, _ = sass.check(done.cubin, kernel.function, problem("bf16gemm").sass_requirements)
    assert len(failures) == 1 and failures[0].startswith("it does not use tensor cores")


@needs_sass_tools
def test_missing_ldmatrix_and_cp_async_are_explained(compiled):
    failures, _ = sass.check(compiled["wmma"].cubin, "tc_wmma", ("ldsm", "ldgsts"))
    assert [f.split(":")[0] for f in failures] == ["its fragments are not loaded with ldmatrix",
                                                   "its tiles are not copied with cp.async"]


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_solutions_compile(path):
    kernel = SPEC.kernel(tracks.graded_kernel(path))
    compile_cuda(path.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())


@needs_sass_tools
@pytest.mark.parametrize("path", [p for p in WRONG if set(tracks.expected_points(p)) & set(STRUCTURE_CHECKS)],
                         ids=lambda p: p.stem)
def test_wrong_solutions_get_their_structural_points(path):
    for check_id, expected in tracks.expected_points(path).items():
        if check_id in STRUCTURE_CHECKS:
            try:
                points = check_sass("tensorcores", check_id, path.read_text())
            except KernelFailed:
                points = 0
            assert expected.matches(points), f"{check_id}: {points:g} points, expected {expected}"


# --- WMMA or mma.sync: read from the PTX ----------------------------------------------------------------

PTX = """
    // begin inline asm
    @%p1 wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32 {%f1, %f2}, {%r1}, {%r2}, {%f1, %f2};
    // mma.sync.aligned.m16n8k16 in a comment is no instruction
$L__BB0_2:  ld.shared.u32 %r3, [%r4]; { .reg .f16 lo; mov.b32 {lo, hi}, %r5; }
"""


def test_ptx_opcodes_skip_comments_labels_predicates_and_declarations():
    assert sass.ptx_opcodes(PTX) == {"wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32",
                                     "ld.shared.u32", "mov.b32"}


def test_mma_sync_requirement_tells_wmma_from_mma_sync():
    from graders.cuda_engine.compile import compile_ptx
    kernel = SPEC.kernel("mma")
    check = sass.REQUIREMENTS["mma_sync"][0]
    mma = compile_ptx(kernel.reference.read_text(), defines=kernel.geometry.defines())
    wmma = compile_ptx(SPEC.kernel("wmma_smem").reference.read_text(), defines=kernel.geometry.defines())
    assert check(mma, {}) == ""
    assert check(wmma, {}).startswith("it uses WMMA (wmma.load, wmma.mma, wmma.store in its PTX)")
    assert check("\tadd.f32 %f1, %f2, %f3;", {}).startswith("its PTX has no mma.sync")
    with pytest.raises(ValueError, match="need the kernel's PTX"):
        done = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())
        sass.check(done.cubin, kernel.function, ("mma_sync",))


# --- the TF32 tolerance ---------------------------------------------------------------------------------

def _tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to TF32 as cvt.rna.tf32.f32 does: 10 explicit significand bits, to nearest, ties away."""
    return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


def _fp32_case(k: int):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, k, generator=gen), torch.randn(k, 64, generator=gen)
    return a, b, problem("tf32gemm").reference([a, b])


@pytest.mark.parametrize("k", [32, 1024, 4096])
def test_tf32_products_pass_and_bf16_inputs_fail(k):
    """Measured here: TF32-rounded inputs give a relative Frobenius error of 2.9e-4, bf16-rounded ones 2.3e-3."""
    a, b, expected = _fp32_case(k)
    compare = problem("tf32gemm").compare
    assert compare((_tf32(a).double() @ _tf32(b).double()).float(), expected) == ""
    why = compare((a.bfloat16().double() @ b.bfloat16().double()).float(), expected)
    assert "relative Frobenius error" in why and "(allowed 0.001)" in why


@pytest.mark.parametrize("factor, ok", [(0.9, True), (1.1, False)])
def test_tf32_frobenius_edge(factor, ok):
    a, b, expected = _fp32_case(256)
    out = (expected.c * (1 + factor * KIND.TF32_FROBENIUS_RTOL)).float()
    assert (problem("tf32gemm").compare(out, expected) == "") == ok


@pytest.mark.parametrize("factor, ok", [(0.9, True), (1.1, False)])
def test_tf32_element_bound_edge(factor, ok):
    a, b, expected = _fp32_case(256)
    out = expected.c.float().clone()
    out[5, 7] = float(expected.c[5, 7] + factor * expected.bound[5, 7])
    why = problem("tf32gemm").compare(out, expected)
    assert (why == "") == ok, why
