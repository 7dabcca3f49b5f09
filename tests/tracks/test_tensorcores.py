"""The tensor-core worklog without a GPU: the spec, the bf16gemm kind and its tolerance at its edges (and the
precision menu's: TF32, fp8), every reference compiled for sm_90 with the SASS its step teaches, what sm_90
makes of an e4m3 mma.sync, the known-wrong solutions' structural points."""
from __future__ import annotations

import re

import pytest
import torch

from graders import tracks
from graders.cuda_engine import sass
from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.structure import check_sass, load_structure

TRACK = tracks.get("tensorcores")
KIND = TRACK.problem_module()
SPEC = load_spec("tensorcores")
STRUCTURE_CHECKS = load_structure("tensorcores").checks
WRONG = TRACK.wrong_solutions()
ORDER = ["wmma", "wmma_smem", "mma", "swizzle", "pipeline", "warptiling", "fp16", "tf32", "fp8"]
# what each step's SASS must hold beyond HMMA and no local memory: ldmatrix from step 3, cp.async from step 5
TAUGHT = {"wmma": (), "wmma_smem": (), "mma": ("ldsm",), "swizzle": ("ldsm",), "pipeline": ("ldsm", "ldgsts"),
          "warptiling": ("ldsm", "ldgsts"), "fp16": ("ldsm", "ldgsts"), "tf32": ("ldsm", "ldgsts"),
          "fp8": ("ldsm", "ldgsts", "e4m3")}

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


# --- spec and problem ---------------------------------------------------------------------------------

def test_spec_lists_the_six_steps_and_the_precision_menu_in_order():
    assert list(SPEC.kernels) == ORDER
    assert [k.reference.name for k in SPEC.kernels.values()] == [f"{kid}.cu" for kid in ORDER]
    assert [k.kind for k in SPEC.kernels.values()] == ["bf16gemm"] * 6 + ["f16gemm", "tf32gemm", "fp8gemm"]
    assert all(k.perf_shape == (4096, 4096, 4096) for k in SPEC.kernels.values())
    assert SPEC.requires_gpu
    assert SPEC.kernel("swizzle").counter.relative_to == "mma"


def test_check_shapes_are_multiples_of_each_tile():
    for kid, kernel in SPEC.kernels.items():
        tile_x, tile_y = kernel.geometry.tile
        depth = dict(kernel.geometry.params).get("BK", 16)
        assert all(m % tile_y == 0 and n % tile_x == 0 and k % depth == 0 for m, n, k in kernel.check_shapes), kid
        assert any(m != n for m, n, _ in kernel.check_shapes), kid


@pytest.mark.parametrize("name, c_type", [("bf16gemm", "bf16"), ("f16gemm", "f16"), ("tf32gemm", "float"),
                                          ("fp8gemm", "fp8")])
def test_problem_kinds(name, c_type):
    kind = problem(name)
    assert kind.work((4096, 4096, 4096)) == 2 * 4096 ** 3 and kind.work_unit == "FLOP"
    assert kind.grid((640, 128, 1056), (64, 64)) == (2, 10, 1)
    assert kind.roof is None                       # the FP32 peak does not bound tensor cores
    assert kind.sass_requirements == ("tensor_cores",)
    assert kind.signature == f"(float* C, const {c_type}* A, const {c_type}* B, int M, int N, int K)"
    assert kind.precision.endswith(", fp32 accumulate") and kind.accuracy is KIND.products_accuracy


@pytest.mark.parametrize("name, dtype", [("bf16gemm", torch.bfloat16), ("f16gemm", torch.float16),
                                         ("tf32gemm", torch.float32), ("fp8gemm", torch.float8_e4m3fn)])
def test_inputs_are_of_the_kinds_dtype_and_fenced_with_nan(name, dtype):
    a, b = problem(name).make_inputs((48, 32, 16), torch.Generator().manual_seed(1))
    assert a.dtype == b.dtype == dtype and a.shape == (48, 16) and b.shape == (16, 32)
    for t in (a, b):
        base = t.untyped_storage()
        whole = torch.tensor([], dtype=dtype).set_(base)
        assert torch.isnan(whole[:KIND.INPUT_GUARD]).all() and torch.isnan(whole[-KIND.INPUT_GUARD:]).all()
        assert not torch.isnan(t).any()
    assert a.stride() == (16, 1)
    assert b.stride() == ((1, 16) if name == "fp8gemm" else (32, 1))   # fp8's B is column-major, as cuBLAS's


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


def test_accuracy_measures_the_errors_of_a_correct_output():
    """What the feedback's precision table shows: the largest error over the largest |C|, the relative Frobenius
    error, and the largest share of an element's allowance used."""
    a, b, expected = _case(64, 96, 256)
    # the product rounded to fp32 once: at most 2^-24 |C| <= 2^-24 (|A| @ |B|), 1 / (4 K) of the allowance
    assert KIND.products_accuracy(expected.c.float(), expected)["element_bound_used"] <= 1 / (4 * 256)
    c = expected.c.clone()
    c[5, 7] += 0.5 * expected.bound[5, 7]
    measured = KIND.products_accuracy(c, expected)
    assert measured["element_bound_used"] == pytest.approx(0.5, rel=1e-6)
    assert measured["max_rel_error"] == pytest.approx(0.5 * float(expected.bound[5, 7] / expected.c.abs().max()))
    assert measured["frobenius_rel_error"] == pytest.approx(
        0.5 * float(expected.bound[5, 7] / torch.linalg.vector_norm(expected.c)))
    assert KIND.products_mismatch(c.float(), expected) == ""


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
    if kernel_id == "tf32":   # A's fragments by ldmatrix (rows of 4 floats), B's (a column) by scalar loads
        assert sass.opcode_count(text, "LDSM") > 0 and sass.opcode_count(text, "LDS") > 0
    if kernel_id == "fp8":   # sm_90 has no fp8 mma.sync: e4m3 pairs converted to fp16, then fp16 HMMA
        assert "QMMA" not in sass.tensor_core_ops(text)
        ops = _mnemonics(text)
        assert ops["HMMA.16816.F32"] == sass.tensor_core_ops(text)["HMMA"]
        # a fragment is converted once for all the mmas that use it: not the 6 F2FP an HMMA of a lone mma.sync
        assert 0 < ops["F2FP.F16.E4M3.UNPACK_B"] <= ops["HMMA.16816.F32"]
    if "ldgsts" not in TAUGHT[kernel_id]:
        assert sass.opcode_count(text, "LDGSTS") == 0


_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def k_loop(text: str) -> tuple[int, int, int]:
    """(instructions, HMMA, loops inside it) of the SASS loop that holds the most HMMA: the K loop. A loop is an
    instruction range closed by a backward branch."""
    code = [(int(m.group(1), 16), m.group(2).split(".")[0], m.group(3))
            for m in map(_SASS_LINE.search, text.splitlines()) if m]
    loops = [(int(target.group(1), 16), at) for at, op, operands in code
             if op == "BRA" and (target := re.search(r"0x([0-9a-f]+)", operands)) and int(target.group(1), 16) < at]
    start, end = max(loops, key=lambda loop: sum(loop[0] <= at <= loop[1] and op == "HMMA" for at, op, _ in code))
    body = [op for at, op, _ in code if start <= at <= end]
    inner = [loop for loop in loops if loop != (start, end) and start <= loop[0] and loop[1] <= end]
    return len(body), body.count("HMMA"), len(inner)


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", ["warptiling", "fp16"])
def test_step_6s_k_loop_is_little_more_than_ldmatrix_and_mma(compiled, kernel_id):
    """What step 6 teaches beyond its warp tile: copy loops with compile-time trip counts and ldmatrix offsets
    computed once leave no loop inside the K loop and fewer than 2.5 instructions an HMMA (with step 5's copy
    loops, step 6's K loop held 444 instructions for 64 HMMA and two loops, and issued 5.6 an mma.sync on the
    H200: benchmarks/results/tensorcores/tensorcores-gpu-20261204.md)."""
    function = SPEC.kernel(kernel_id).function
    instructions, hmma, inner = k_loop(sass.disassemble(compiled[kernel_id].cubin)[function])
    assert inner == 0 and hmma == 64
    assert instructions / hmma < 2.5, f"{instructions} instructions for {hmma} HMMA"
    _, _, pipeline_inner = k_loop(sass.disassemble(compiled["pipeline"].cubin)[SPEC.kernel("pipeline").function])
    assert pipeline_inner == 2   # the parser sees step 5's runtime copy loops


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
def test_wrong_solutions_compile_unless_it_is_the_compile_error(path):
    kernel = SPEC.kernel(tracks.graded_kernel(path))
    if path.name == "compile_error.cu":
        assert tracks.expected_statuses(path) == ("compile_error",)
        assert tracks.expected_points(path)[f"{kernel.id}_score"].matches(0.0)
        with pytest.raises(CompileError, match='identifier "__nv_bfloat16" is undefined'):
            compile_cuda(path.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())
        return
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


# --- the mma.sync probe of each format (the instruction ceiling the child measures) ------------------------

@needs_sass_tools
@pytest.mark.parametrize("name, shape, types", [
    ("bf16gemm", "m16n8k16", "bf16"), ("f16gemm", "m16n8k16", "f16"), ("tf32gemm", "m16n8k8", "tf32"),
    ("fp8gemm", "m16n8k16", "f16")])
def test_each_kind_brings_the_mma_sync_probe_of_its_format(name, shape, types):
    """The probe runs its kind's mma.sync (fp8's: the fp16 one that sm_90 runs e4m3 on), PROBE_CHAINS a warp an
    iteration (2 m n k FLOPs each), without local memory; no product is computed once for several: the SASS holds
    whole iterations of PROBE_CHAINS instructions, at least two of them."""
    kind = problem(name)
    probe = kind.instruction_probe
    m, n, k = (int(v) for v in shape[1:].replace("n", " ").replace("k", " ").split())
    assert probe.work_per_warp_iteration == KIND.PROBE_CHAINS * 2 * m * n * k
    instruction = f"mma.sync.aligned.{shape}.row.col.f32.{types}.{types}.f32"
    assert probe.name.startswith(instruction) and instruction in probe.source
    done = compile_cuda(probe.source, kernels=("probe",), arch="sm_90")
    assert done.resources["probe"].spill_stores == 0 and done.resources["probe"].stack_bytes == 0
    hmma = sass.tensor_core_ops(sass.disassemble(done.cubin)["probe"])["HMMA"]
    assert hmma % KIND.PROBE_CHAINS == 0 and hmma >= 2 * KIND.PROBE_CHAINS


# --- fp8: e4m3 through mma.sync -----------------------------------------------------------------------------

FP8 = problem("fp8gemm")
# the fp8 rule, restated (not read from problem.py): every element within FP8_ELEMENT_FACTOR K 2^-24 (|A| @ |B|)
# of the float64 product of the e4m3 inputs, and a relative Frobenius error within FP8_FROBENIUS_RTOL
FP8_ELEMENT_FACTOR = 4.0
FP8_FROBENIUS_RTOL = 1e-4
ONE_MMA = r"""
extern "C" __global__ void one_mma(float* out, const unsigned* in)
{
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = in[threadIdx.x * 4 + i];
    b[0] = in[128 + threadIdx.x]; b[1] = in[160 + threadIdx.x];
    float d[4] = {};
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i];
}
"""


def _mnemonics(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for mnemonic in sass._INSTRUCTION.findall(text):
        counts[mnemonic] = counts.get(mnemonic, 0) + 1
    return counts


@needs_sass_tools
@pytest.mark.parametrize("arch, expected", [
    ("sm_89", {"QMMA.16832.F32.E4M3.E4M3": 1}),
    ("sm_90", {"F2FP.F16.E4M3.UNPACK_B": 12, "HMMA.16816.F32": 2}),
])
def test_what_an_e4m3_mma_sync_compiles_to(arch, expected):
    """Ada has an fp8 mma.sync (QMMA); for sm_90 ptxas converts the 12 registers of e4m3 pairs to fp16 pairs and
    runs two fp16 HMMA.16816 (the k32 product in two halves): Hopper's fp8 rate is wgmma's alone."""
    text = sass.disassemble(compile_cuda(ONE_MMA, kernels=("one_mma",), arch=arch).cubin)["one_mma"]
    ops = _mnemonics(text)
    assert {m: n for m, n in ops.items() if m.split(".")[0] in ("QMMA", "HMMA", "F2FP")} == expected
    assert sass.REQUIREMENTS["e4m3"][0](text, {}) == ""


def _fp8_case(m: int, n: int, k: int, seed: int = 0):
    a, b = FP8.make_inputs((m, n, k), torch.Generator().manual_seed(seed))
    return a, b, FP8.reference([a, b])


def test_fp8_reference_and_baseline_on_cpu():
    """The reference is the float64 product of the e4m3 values; the baseline (torch._scaled_mm, which torch's CPU
    build also runs) computes the same product into fp32."""
    a, b, expected = _fp8_case(64, 32, 128)
    assert torch.equal(expected.c, a.double() @ b.double())
    out = torch.full((64, 32), float("nan"))
    FP8.baseline(out, [a, b])
    assert FP8.compare(out, expected) == ""


@pytest.mark.parametrize("chunk, rounding", [(1, "toward-zero"), (16, "nearest"), (32, "nearest"),
                                             (32, "toward-zero")],
                         ids=["per-element-truncated", "per-k16", "per-mma", "per-mma-truncated"])
def test_fp8_with_fp32_accumulation_passes_at_k_4096(chunk, rounding):
    """fp32 accumulation of e4m3 products, per product or per 16- or 32-deep MMA (sm_90 adds each k32 product to
    the accumulator with FADD); measured here: relative Frobenius error at most 6.4e-8 (truncating each product:
    e4m3 products have 8 significant bits, so most partial sums are exact)."""
    a, b, expected = _fp8_case(64, 64, 4096)
    round_fn = (lambda x: x.float().double()) if rounding == "nearest" else _to_fp32_toward_zero
    assert FP8.compare(_accumulated(a, b, chunk, round_fn), expected) == ""


@pytest.mark.parametrize("k", [64, 1024, 4096])
def test_fp8_with_fp16_accumulation_is_rejected(k):
    """The fp8_f16_accumulate known-wrong kernel's arithmetic: the running sum in fp16, rounded after every 16
    products; measured here: relative Frobenius error 3.3e-4 at K = 64, 2.3e-3 at K = 4096."""
    a, b, expected = _fp8_case(64, 64, k)
    why = FP8.compare(_accumulated(a, b, 16, lambda x: x.half().double()), expected)
    assert "relative Frobenius error" in why and "(allowed 0.0001)" in why


@pytest.mark.parametrize("rounded", [torch.float16, torch.float8_e5m2, torch.float8_e4m3fn])
def test_fp8_with_a_low_precision_output_is_rejected(rounded):
    """C right, then rounded to fp16 (measured: relative Frobenius error 2.1e-4, twice the allowance), or to an
    fp8 format (5e-2 and more)."""
    a, b, expected = _fp8_case(64, 64, 1024)
    why = FP8.compare(expected.c.to(rounded).float(), expected)
    assert "relative Frobenius error" in why and "(allowed 0.0001)" in why


def test_fp8_inputs_read_as_e5m2_or_b_read_row_major_are_rejected():
    """The fp8_e5m2 known-wrong kernel's arithmetic (each e4m3 byte read as e5m2), and the layout mistake of the
    other steps' row-major B (B's bytes, N x K in memory, read as K x N)."""
    a, b, expected = _fp8_case(64, 64, 64)
    as_e5m2 = [t.view(torch.uint8).view(torch.float8_e5m2).double() for t in (a, b.t().contiguous())]
    assert "outside the fp32-accumulation tolerance" in FP8.compare((as_e5m2[0] @ as_e5m2[1].t()).float(), expected)
    row_major = b.t().contiguous().view(64, 64)
    assert "outside the fp32-accumulation tolerance" in FP8.compare((a.double() @ row_major.double()).float(),
                                                                    expected)


@pytest.mark.parametrize("factor, ok", [(0.9, True), (1.1, False)])
def test_fp8_element_bound_edge(factor, ok):
    a, b, expected = _fp8_case(64, 96, 256)
    out = expected.c.float().clone()
    bound = FP8_ELEMENT_FACTOR * 256 * 2.0 ** -24 * float((a.double().abs() @ b.double().abs())[5, 7])
    out[5, 7] = float(expected.c[5, 7]) + factor * bound
    why = FP8.compare(out, expected)
    assert (why == "") == ok, why
    if not ok:
        assert "1 of 6144 values outside the fp32-accumulation tolerance; first at C[5][7]" in why


@pytest.mark.parametrize("factor, ok", [(0.9, True), (1.1, False)])
def test_fp8_frobenius_edge(factor, ok):
    a, b, expected = _fp8_case(64, 96, 1024)
    out = (expected.c * (1 + factor * FP8_FROBENIUS_RTOL)).float()
    why = FP8.compare(out, expected)
    assert (why == "") == ok, why


def test_the_worklog_chart_marks_each_steps_mma_sync_ceiling(tmp_path):
    """Made-up numbers: the chart's ceiling markers are the rows' mma_ceiling_gflops, where a row has one."""
    from graders.cuda_engine.worklog_chart import ceiling_marks, plot
    kernels = {"wmma": {"gflops": 50e3, "ratio": 0.08, "status": "ok", "mma_ceiling_gflops": 640e3},
               "fp8": {"gflops": 200e3, "ratio": 0.2, "status": "ok", "mma_ceiling_gflops": 600e3},
               "tf32": {"gflops": 100e3, "ratio": 0.3, "status": "ok"},
               "broken": {"status": "incorrect", "message": "wrong"}}
    assert ceiling_marks(kernels) == {"wmma": 640e3, "fp8": 600e3}
    record = {"gpu": "a GPU", "date": "", "sizes": {"4096x4096x4096": {"cublas_gflops": 700e3, "kernels": kernels}}}
    path = plot(record, tmp_path / "chart.png", title="The tensor-core worklog", panel="bf16 GEMM")
    assert path.read_bytes().startswith(b"\x89PNG")
