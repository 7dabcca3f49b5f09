"""The serving track without a GPU: its spec, each kind's reference against an independent computation, each
tolerance against an fp32 emulation of a right kernel and of each known bug, the inputs' layout (pages, block table,
NaN fences, packed int4), the baselines on CPU tensors, every reference and known-wrong solution compiled (sm_90, the
FP8 GEMM sm_90a; no spills; 16-byte loads in the memory-bound references' SASS; the FP8 GEMM's fp8 wgmma, TMA,
setmaxnreg, registers, shared memory and tensor maps; its promotion into fp32 against an emulation of the fp8 tensor
cores' 13-bit accumulator), the CPU preview (every reference right and every known-wrong one wrong where it runs; the
FP8 GEMM's kernels it cannot run) and the prefill-against-decode key. Speed and grading through nbgrader need the
GPU: tests/gpu/test_serving_gpu.py."""
from __future__ import annotations

import ctypes
import math
import re

import pytest
import torch
from previews import HAVE_GXX, Job, run_all

from graders import tracks
from graders.cuda_engine import child, extended_launch, sass
from graders.cuda_engine.child import verdict
from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.extended_launch import MapFields, map_fields
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from graders.quiz_engine.grade import answer_key, is_right, right_answer
from graders.quiz_engine.questions import Choice, Numeric, numbers

TRACK = tracks.get("serving")
SPEC = load_spec("serving")
SERVING = TRACK.problem_module()
ORDER = ["rmsnorm", "swiglu", "paged_decode", "w4a16_b1", "w4a16_b16", "fp8_gemm"]
WRONG = {p.stem: p for p in TRACK.wrong_solutions()}
BUGS = {"page_boundary": "paged_decode", "contiguous_table": "paged_decode", "nibbles_swapped": "w4a16_b1",
        "scale_twice": "fp8_gemm", "fast_accumulation": "fp8_gemm"}
FP8_BUGS = [name for name, kid in BUGS.items() if kid == "fp8_gemm"]   # wgmma kernels: the preview cannot run them

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


def inputs(kind: str, shape, seed=0):
    return problem(kind).make_inputs(shape, torch.Generator().manual_seed(seed))


def bf16_out(values: torch.Tensor) -> torch.Tensor:
    """``values`` rounded to bf16 in the fp32 words the engine allocates (two a word)."""
    packed = values.to(torch.bfloat16).contiguous()
    return packed.view(torch.float32)


def test_spec_lists_the_steps_in_order_with_targets_measured():
    assert list(SPEC.kernels) == ORDER and SPEC.targets == "measured" and SPEC.measured_in
    assert [k.kind for k in SPEC.kernels.values()] == ["rmsnorm_residual", "swiglu", "paged_decode", "w4a16_gemv",
                                                       "w4a16_gemv", "fp8_scaled_gemm"]
    assert all(k.floor < k.target for k in SPEC.kernels.values())
    assert {s[0] for s in SPEC.kernel("w4a16_b1").check_shapes} == {1} and SPEC.kernel("w4a16_b16").perf_shape[0] == 16
    assert [problem(k.kind).roof for k in SPEC.kernels.values()] == ["dram"] * 5 + [None]   # no tensor-core peak


# ---- RMSNorm + residual ---------------------------------------------------------------------------------------

def test_rmsnorm_reference_is_the_formula_element_by_element():
    x, r, w = ins = inputs("rmsnorm_residual", (3, 40), seed=1)
    found = SERVING.rmsnorm_reference(ins).exact
    for row in range(3):
        h = [float(x[row, c]) + float(r[row, c]) for c in range(40)]
        inv = 1 / math.sqrt(sum(v * v for v in h) / 40 + 1e-6)
        for c in range(40):
            assert math.isclose(float(found[0, row, c]), h[c], rel_tol=1e-15)
            assert math.isclose(float(found[1, row, c]), h[c] * inv * float(w[c]), rel_tol=1e-12)


def _rmsnorm_fp32(x, r, w, *, round_h=True, residual=True, weight=True):
    h = (x.float() + r.float()) if residual else x.float()
    hb = h.to(torch.bfloat16).float() if round_h else h
    y = hb * torch.rsqrt(hb.pow(2).mean(-1, keepdim=True) + 1e-6) * (w.float() if weight else 1.0)
    return bf16_out(torch.stack([h, y]))


@pytest.mark.parametrize("shape", [(37, 4096), (5, 8200), (1, 8)])
def test_rmsnorm_tolerance_passes_fp32_and_fails_each_bug(shape):
    x, r, w = ins = inputs("rmsnorm_residual", shape, seed=2)
    expected = SERVING.rmsnorm_reference(ins)
    kind = problem("rmsnorm_residual")
    for round_h in (True, False):
        assert verdict(kind, _rmsnorm_fp32(x, r, w, round_h=round_h), expected) == ""
    for bug in ({"residual": False}, {"weight": False}):
        assert "bf16 values outside the tolerance" in verdict(kind, _rmsnorm_fp32(x, r, w, **bug), expected)
    # the sum of squares in bf16: rows of scale 30 lose it
    h = (x.float() + r.float()).to(torch.bfloat16)
    squares = torch.zeros(shape[0], dtype=torch.bfloat16)
    for c in range(shape[1]):
        squares += h[:, c] * h[:, c]
    y = h.float() * torch.rsqrt(squares.float()[:, None] / shape[1] + 1e-6) * w.float()
    if shape[1] > 8:
        assert verdict(kind, bf16_out(torch.stack([h.float(), y])), expected) != ""


def test_an_unwritten_word_fails_as_never_written_and_a_nan_half_as_nan():
    ins = inputs("rmsnorm_residual", (3, 1000))
    expected = SERVING.rmsnorm_reference(ins)
    out = _rmsnorm_fp32(*ins)
    out[1, 2, 7] = float("nan")   # the grader's poison: the word's high half a bf16 NaN, its low half 0
    message = verdict(problem("rmsnorm_residual"), out, expected)
    assert message.startswith("1 of 3000 output words (two bf16 values each) never written")
    assert "out[1, 2, 14]" in message
    out = _rmsnorm_fp32(*ins)
    out.view(torch.bfloat16)[0, 0, 3] = float("nan")   # one bf16 NaN, its neighbour right
    message = verdict(problem("rmsnorm_residual"), out, expected)
    assert message.startswith("1 of 6000 bf16 values outside") and "first at out[0, 0, 3]: " in message


# ---- SwiGLU ---------------------------------------------------------------------------------------------------

def test_swiglu_reference_is_silu_gate_times_up():
    (x,) = ins = inputs("swiglu", (4, 16), seed=3)
    found = SERVING.swiglu_reference(ins).exact
    for t in range(4):
        for c in range(16):
            g, u = float(x[t, c]), float(x[t, 16 + c])
            assert math.isclose(float(found[t, c]), g / (1 + math.exp(-g)) * u, rel_tol=1e-12, abs_tol=1e-300)


@pytest.mark.parametrize("shape", [(37, 2056), (16, 14336)])
def test_swiglu_tolerance_passes_fp32_and_fails_each_bug(shape):
    (x,) = ins = inputs("swiglu", shape, seed=4)
    expected = SERVING.swiglu_reference(ins)
    kind = problem("swiglu")
    g, u = x[:, :shape[1]].float(), x[:, shape[1]:].float()
    assert float(g.abs().max()) > 89   # exp overflows in fp32 somewhere
    assert verdict(kind, bf16_out(g / (1 + torch.exp(-g)) * u), expected) == ""
    assert "(NaN" in verdict(kind, bf16_out(torch.exp(g) / (1 + torch.exp(g)) * g * u), expected)
    assert verdict(kind, bf16_out(u / (1 + torch.exp(-u)) * g), expected) != ""   # gate and up swapped


# ---- paged decode ---------------------------------------------------------------------------------------------

PAGED = (4, 8, 2, 100, 128, 16)


def test_lengths_are_mixed_with_every_boundary_case():
    for kernel_shapes in (SPEC.kernel("paged_decode").check_shapes, [SPEC.kernel("paged_decode").perf_shape]):
        for shape in kernel_shapes:
            lengths, (batch, _, _, max_len, _, page) = SERVING.sequence_lengths(shape), shape
            assert len(lengths) == batch and max(lengths) == max_len and min(lengths) >= 1
            assert any(n % page == 0 for n in lengths) and (batch < 3 or 1 in lengths)
            assert SERVING.sequence_lengths(shape) == lengths   # a function of the shape


def test_pages_are_scattered_unused_slots_nan_and_the_table_points_at_them():
    q, k, v, table, lens = inputs("paged_decode", PAGED, seed=5)
    page = PAGED[5]
    owned = [p for b, n in enumerate(lens.tolist()) for p in table[b, :-(-n // page)].tolist()]
    assert len(owned) == len(set(owned)) and 0 not in owned and max(owned) < k.shape[0]
    assert owned != sorted(owned)   # not in order
    assert k.shape[0] > table.numel()   # a table read as contiguous stays inside the pool
    for b, n in enumerate(lens.tolist()):
        used = -(-n // page)
        assert torch.all(table[b, used:] == 0)
        last, live = int(table[b, used - 1]), n - (used - 1) * page
        assert torch.isnan(k[last, live:].float()).all() and torch.isnan(v[last, live:].float()).all()
        assert not torch.isnan(k[last, :live].float()).any() and not torch.isnan(v[last, :live].float()).any()
    assert torch.isnan(k[0].float()).all()
    assert q.dtype == k.dtype == torch.bfloat16 and table.dtype == lens.dtype == torch.int32


def _dense_attention(q, k, v, table, lens, *, drop_full_last=False, contiguous=False):
    """fp32 decode attention token by token through the block table, written independently of the reference."""
    batch, q_heads, d = q.shape
    page, kv_heads = k.shape[1], k.shape[2]
    out = torch.empty(batch, q_heads, 1, d)
    for b, n in enumerate(lens.tolist()):
        if drop_full_last and n % page == 0:
            n -= page
        rows = []
        for t in range(n):
            p = b * table.shape[1] + t // page if contiguous else int(table[b, t // page])
            rows.append((k[p, t % page].float(), v[p, t % page].float()))
        for h in range(q_heads):
            kvh = h // (q_heads // kv_heads)
            scores = torch.stack([q[b, h].float() @ kr[kvh] for kr, _ in rows]) / math.sqrt(d) if rows else None
            if scores is None:
                out[b, h, 0] = float("nan")
                continue
            p_ = torch.softmax(scores, 0)
            out[b, h, 0] = sum(p_[i] * rows[i][1][kvh] for i in range(len(rows)))
    return out


@pytest.mark.parametrize("shape", [PAGED, (3, 4, 4, 48, 64, 16)])
def test_paged_reference_passes_an_independent_fp32_decode_and_fails_each_bug(shape):
    ins = inputs("paged_decode", shape, seed=6)
    expected = SERVING.paged_reference(ins)
    kind = problem("paged_decode")
    assert verdict(kind, _dense_attention(*ins), expected) == ""
    assert verdict(kind, _dense_attention(*ins, drop_full_last=True), expected) != ""
    assert "are NaN" in verdict(kind, _dense_attention(*ins, contiguous=True), expected)


def test_paged_bytes_count_the_live_tokens_once():
    shape = (64, 32, 8, 4096, 128, 16)
    lengths = SERVING.sequence_lengths(shape)
    kv = sum(lengths) * 8 * 128 * 2 * 2
    assert problem("paged_decode").work(shape) - kv == (64 * 32 * 128 * 6 + 4 * sum(-(-n // 16) for n in lengths)
                                                        + 4 * 64)
    assert 0.3 < sum(lengths) / (64 * 4096) < 0.7   # mixed: about half the padded cache


# ---- W4A16 ----------------------------------------------------------------------------------------------------

def test_unpack_takes_the_even_k_from_the_low_nibble():
    assert SERVING.unpack_int4(torch.tensor([[0x21, 0xF8]], dtype=torch.uint8)).tolist() == [[1, 2, 8, 15]]


def test_w4a16_reference_is_the_decode_element_by_element():
    w, scales, x = ins = inputs("w4a16_gemv", (2, 3, 256), seed=7)
    found = SERVING.w4a16_reference(ins)
    for b in range(2):
        for n in range(3):
            terms = [((int(w[n, k // 2]) >> (4 * (k % 2)) & 15) - 8) * float(scales[n, k // 128]) * float(x[b, k])
                     for k in range(256)]
            assert math.isclose(float(found.exact[b, n]), sum(terms), rel_tol=1e-12, abs_tol=1e-300)
            assert math.isclose(float(found.magnitude[b, n]), sum(map(abs, terms)), rel_tol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1000, 4224), (16, 129, 1024)])
def test_w4a16_tolerance_passes_fp32_and_fails_swapped_nibbles(shape):
    w, scales, x = ins = inputs("w4a16_gemv", shape, seed=8)
    expected = SERVING.w4a16_reference(ins)
    kind = problem("w4a16_gemv")
    weights = SERVING.dequantise_int4(w, scales).float()
    assert verdict(kind, x.float() @ weights.T, expected) == ""
    swapped = ((w >> 4) | (w << 4)).to(torch.uint8)
    wrong = x.float() @ SERVING.dequantise_int4(swapped, scales).float().T
    found = re.match(r"(\d+) of (\d+) values of y wrong", verdict(kind, wrong, expected))
    count, total = (int(v) for v in found.groups())
    assert total == shape[0] * shape[1] and count > 0.99 * total


def test_w4a16_roofline_copies_the_weights_and_scales_only():
    w, scales, x = ins = inputs("w4a16_gemv", (1, 64, 256))
    before = torch.tensor([], dtype=torch.uint8).set_(w.untyped_storage()).clone()
    SERVING.copy_weights(torch.empty(1, 64), ins)
    half = before.numel() // 2
    after = torch.tensor([], dtype=torch.uint8).set_(w.untyped_storage())
    assert torch.equal(after[half:2 * half], before[:half]) and 2 * half == w.numel() + 2 * scales.numel()
    assert problem("w4a16_gemv").work((1, 64, 256)) - 2 * half == 2 * 256 + 4 * 64


# ---- FP8 GEMM with per-tensor scales ----------------------------------------------------------------------------

def test_fp8_reference_is_the_scaled_product_element_by_element():
    a, b, sa, sb = ins = inputs("fp8_scaled_gemm", (4, 3, 64), seed=9)
    assert a.dtype == b.dtype == torch.float8_e4m3fn and b.stride() == (1, 64) and sa.numel() == sb.numel() == 1
    assert 0.05 <= float(sa) < 0.5 and 0.05 <= float(sb) < 0.5
    found = SERVING.fp8_reference(ins)
    for i in range(4):
        for j in range(3):
            total = sum(float(a[i, k]) * float(b[k, j]) for k in range(64)) * float(sa) * float(sb)
            assert math.isclose(float(found.c[i, j]), total, rel_tol=1e-12, abs_tol=1e-300)


@pytest.mark.parametrize("shape", [(256, 384, 192), (128, 128, 1024)])
def test_fp8_tolerance_passes_fp32_and_fails_a_scale_twice_or_missing(shape):
    a, b, sa, sb = ins = inputs("fp8_scaled_gemm", shape, seed=10)
    expected = SERVING.fp8_reference(ins)
    kind = problem("fp8_scaled_gemm")
    product = a.float() @ b.float()
    assert verdict(kind, product * (sa * sb), expected) == ""
    baseline = torch.empty(shape[0], shape[1])
    kind.baseline(baseline, ins)   # the CPU stand-in of torch._scaled_mm
    assert verdict(kind, baseline, expected) == ""
    for wrong in (product * (sa * sb * sa), product):
        assert "values outside the fp32-accumulation tolerance" in verdict(kind, wrong, expected)


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", ["rmsnorm", "swiglu", "paged_decode", "w4a16_b1"])
def test_memory_bound_references_load_16_bytes_at_a_time_without_local_memory(kernel_id):
    kernel = SPEC.kernel(kernel_id)
    cubin = compiled(kernel_id, kernel.reference.read_text()).cubin
    failures, _ = sass.check(cubin, kernel.function, (*problem(kernel.kind).sass_requirements, "ldg128", "no_local"))
    assert failures == []


# ---- the FP8 GEMM's wgmma reference ------------------------------------------------------------------------------

SM_SHARED = 233472        # an H100's or H200's shared memory a SM (228 KiB); a block opts into at most 227 KiB
BLOCK_SHARED = 232448
RESERVED = 1024           # the shared memory the system keeps for each resident block
REGISTER_FILE = 65536     # 32-bit registers an SM
SMS = 132                 # an H100 SXM's or H200's SMs


def test_fp8_step_is_a_persistent_warp_specialised_launch_for_sm_90a():
    kernel = SPEC.kernel("fp8_gemm")
    d = kernel.geometry.defines()
    assert kernel.launch.arch == "sm_90a" and kernel.launch.persistent and kernel.warp_specialised
    assert kernel.geometry.block == (384, 1) and (d["TILE_X"], d["TILE_Y"], d["BK"]) == (128, 128, 128)
    assert kernel.sass_requirements == () and problem(kernel.kind).sass_requirements == ("tensor_cores",)
    assert all(k.launch.arch is None for kid, k in SPEC.kernels.items() if kid != "fp8_gemm")


def test_fp8_shared_memory_is_the_stages_and_the_swizzle_alignment():
    """STAGES tiles of A and B (one byte a value) and 1 KiB to align the first to the 128-byte swizzle's 1024-byte
    pattern; with the static barriers within what a block may opt into, one block an SM."""
    kernel = SPEC.kernel("fp8_gemm")
    d = kernel.geometry.defines()
    smem = kernel.launch.dynamic_smem
    assert smem == d["STAGES"] * (d["TILE_Y"] + d["TILE_X"]) * d["BK"] + 1024 == 197632
    static = 2 * d["STAGES"] * 8   # the full and empty barriers
    assert smem + static <= BLOCK_SHARED and smem + static + RESERVED <= SM_SHARED


def test_fp8_check_shapes_are_whole_tiles_with_more_slabs_than_stages_and_more_tiles_than_sms():
    kernel = SPEC.kernel("fp8_gemm")
    d = kernel.geometry.defines()
    shapes = (*kernel.check_shapes, kernel.perf_shape)
    assert all(m % d["TILE_Y"] == 0 and n % d["TILE_X"] == 0 and k % d["BK"] == 0 for m, n, k in shapes)
    assert any(m != n != k != m for m, n, k in kernel.check_shapes)
    assert max(k for _, _, k in kernel.check_shapes) // d["BK"] > d["STAGES"]
    tiles = [m // d["TILE_Y"] * (n // d["TILE_X"]) for m, n, _ in kernel.check_shapes]
    assert max(tiles) > 2 * SMS and min(tiles) == 1
    assert min(k for _, _, k in kernel.check_shapes) >= 512   # the emulated accumulator's margin: see below


def test_fp8_tensor_maps_are_uint8_over_the_tensors_as_allocated():
    """A's map: dimensions K then M, rows K bytes apart; B's (column-major: the transpose of a row-major N x K):
    K then N; each box BK x 128 values, a 128-byte row, the 128-byte swizzle's span (the encoding needs the GPU)."""
    kernel = SPEC.kernel("fp8_gemm")
    assert [m.operand for m in kernel.launch.tensor_maps] == ["A", "B"]
    for shape in (*kernel.check_shapes, kernel.perf_shape):
        m, n, k = shape
        a, b, _, _ = inputs("fp8_scaled_gemm", shape)
        for spec, t, dims in zip(kernel.launch.tensor_maps, (a, b), ((k, m), (k, n))):
            fields = map_fields(spec, str(t.dtype).removeprefix("torch."), tuple(t.shape), t.stride(),
                                t.element_size(), kernel.geometry.defines())
            assert (fields.data_type, fields.global_dim, fields.global_strides) == ("UINT8", dims, (k,))
            assert fields.box == (128, 128) and fields.swizzle == "128B" and t.element_size() == 1


def test_the_child_launches_the_fp8_kernel_once_an_sm_with_its_scales_and_maps_after_the_sizes(monkeypatch):
    """`Harness.launch` at the check shape of 270 tiles on a GPU of 132 SMs, the driver calls replaced: 132 blocks of
    384 threads in one row, the dynamic shared memory, and the arguments C, A, B, scale_a, scale_b, M, N, K, then
    A's and B's maps (UINT8, rows K bytes apart, 128 x 128 boxes)."""
    kernel = SPEC.kernel("fp8_gemm")
    calls = []
    monkeypatch.setattr(extended_launch, "encode", lambda fields, address: calls.append((fields, address))
                        or bytes([len(calls)]) * 128)
    launched = []
    monkeypatch.setattr(extended_launch, "launch", lambda handle, config, arguments: launched.append(
        (config, arguments)))
    bench = object.__new__(child.Harness)
    bench.torch, bench.problem, bench.geometry = torch, problem(kernel.kind), kernel.geometry
    bench.features, bench.stream, bench.kernel = kernel.launch, type("S", (), {"handle": 5})(), \
        type("K", (), {"handle": "the kernel"})()
    bench.sm_count = SMS
    shape = (2304, 1920, 640)
    assert shape in kernel.check_shapes
    ins = inputs("fp8_scaled_gemm", shape, seed=1)
    out = torch.empty(2304, 1920)
    bench.launch(out, ins, shape)
    a, b, sa, sb = ins
    assert calls == [(MapFields("UINT8", (640, 2304), (640,), (128, 128), "128B"), a.data_ptr()),
                     (MapFields("UINT8", (640, 1920), (640,), (128, 128), "128B"), b.data_ptr())]
    (config, arguments), = launched
    assert (config.gridDimX, config.gridDimY, config.gridDimZ, config.blockDimX) == (SMS, 1, 1, 384)
    assert config.sharedMemBytes == 197632 and config.numAttrs == 0
    slots = (ctypes.c_void_p * 10).from_address(arguments.address)
    read = [ctypes.string_at(slots[i], size) for i, size in enumerate([8] * 5 + [4] * 3 + [128] * 2)]
    assert [int.from_bytes(r, "little") for r in read[:8]] == [t.data_ptr() for t in (out, a, b, sa, sb)] + [
        2304, 1920, 640]
    assert read[8:] == [bytes([1]) * 128, bytes([2]) * 128]


@pytest.fixture(scope="module")
def fp8_compiled() -> dict:
    kernel = SPEC.kernel("fp8_gemm")
    return {name: compiled("fp8_gemm", path.read_text())
            for name, path in {"reference": kernel.reference, **{n: WRONG[n] for n in FP8_BUGS}}.items()}


def test_fp8_wgmma_needs_sm_90a():
    kernel = SPEC.kernel("fp8_gemm")
    with pytest.raises(CompileError, match="not supported on .target 'sm_90'"):
        compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines(),
                     arch="sm_90")


def setmaxnreg_counts(text: str) -> tuple[int, int]:
    """The registers a thread the producer keeps (USETMAXREG.DEALLOC) and the consumers claim (.TRY_ALLOC)."""
    found = dict(re.findall(r"USETMAXREG\.(DEALLOC|TRY_ALLOC)\.CTAPOOL (?:UP\d, )?(0x[0-9a-f]+)", text))
    return int(found["DEALLOC"], 16), int(found["TRY_ALLOC"], 16)


# the fp8 wgmma of e4m3 operands: sm_90a's QGMMA (bf16's is HGMMA), scale-d false where it reads RZ
QGMMA = re.compile(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, gdesc\[UR\d+\], (RZ|R\d+)")


@needs_sass_tools
def test_fp8_reference_sass_is_fp8_wgmma_fed_by_tma_with_setmaxnreg(fp8_compiled):
    """Four QGMMA.64x128x32 .E4M3 a slab, two of them starting a pair from zero (the promotion), two UTMALDG, SYNCS
    barriers, no HMMA and no local memory; 168 registers a thread at one block of 384 an SM, the producer's 40 and
    the two consumers' 232 exactly the block's pool."""
    kernel = SPEC.kernel("fp8_gemm")
    compiled_ = fp8_compiled["reference"]
    failures, facts = sass.check(compiled_.cubin, kernel.function, ("tensor_cores", "wgmma", "tma", "mbarrier",
                                                                    "setmaxnreg", "no_local"))
    assert failures == [] and facts["resources"]["LOCAL"] == 0
    text = sass.disassemble(compiled_.cubin)[kernel.function]
    assert [m for m in QGMMA.findall(text)].count("RZ") == 2 and len(QGMMA.findall(text)) == 4
    assert sass.opcode_count(text, "QGMMA") == 4 and sass.opcode_count(text, "HMMA") == 0
    assert sass.opcode_count(text, "UTMALDG") == 2 and sass.opcode_count(text, "LDG") == 2   # the two scales
    usage = compiled_.resources[kernel.function]
    producer, consumer = setmaxnreg_counts(text)
    assert usage.registers == REGISTER_FILE // 384 // 8 * 8 == 168 and usage.spill_stores == usage.spill_loads == 0
    assert (producer, consumer) == (40, 232) and 128 * (producer + 2 * consumer) == 384 * usage.registers
    assert usage.shared_bytes + kernel.launch.dynamic_smem <= BLOCK_SHARED


@needs_sass_tools
def test_fast_accumulation_keeps_every_wgmma_in_the_tensor_cores_accumulator(fp8_compiled):
    """fast_accumulation.cu differs from the reference only in its accumulation: every QGMMA adds into the running
    sum (none reads RZ) and no FADD promotes it."""
    kernel = SPEC.kernel("fp8_gemm")
    texts = {n: sass.disassemble(c.cubin)[kernel.function] for n, c in fp8_compiled.items()}
    assert QGMMA.findall(texts["fast_accumulation"]).count("RZ") == 0
    assert sass.opcode_count(texts["fast_accumulation"], "FADD") == 0 < sass.opcode_count(texts["reference"], "FADD")
    assert all(sass.check(fp8_compiled[n].cubin, kernel.function, ("tensor_cores",))[0] == [] for n in FP8_BUGS)


def fp8_tensor_core_product(a: torch.Tensor, b: torch.Tensor, promote: int, bits: int = 13) -> torch.Tensor:
    """A @ B as the fp8 tensor cores are reported to sum (DeepSeek-V3: about 14 bits kept; an e8m13 accumulator):
    per k32 wgmma, the accumulator and the 32 exact products aligned to the largest exponent and truncated to
    ``bits`` bits below it, their sum truncated to ``bits`` bits of mantissa; every ``promote`` products the
    accumulator starts from zero and is added into an fp32 sum."""
    def truncate(x, top):
        quantum = torch.ldexp(torch.ones_like(x), (top - bits).to(torch.int32))
        return torch.trunc(x / quantum) * quantum

    def exponent(x):
        return torch.floor(torch.log2(torch.where(x > 0, x, torch.ones_like(x))))

    a, b = a.double(), b.double()
    total = torch.zeros(a.shape[0], b.shape[1])
    for p0 in range(0, a.shape[1], promote):
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
        for k0 in range(p0, p0 + promote, 32):
            terms = torch.cat([acc[..., None], a[:, None, k0:k0 + 32] * b.T[None, :, k0:k0 + 32]], -1)
            summed = truncate(terms, exponent(terms.abs().amax(-1))[..., None]).sum(-1)
            acc = truncate(summed, exponent(summed.abs()))
        total += acc.float()
    return total


@pytest.mark.parametrize("k", sorted({k for _, _, k in SPEC.kernel("fp8_gemm").check_shapes}))
def test_fp8_promotion_every_64_products_meets_the_tolerance_under_a_13_bit_accumulator(k):
    """The reference's promotion (every two wgmmas) and cuBLASLt's (every 128 products) within the kind's tolerance
    at each check shape's K in the emulation (the Frobenius error about 7.6e-5 and 1.3e-4, cuBLASLt's measured on an
    H100 1.26-1.28e-4; the largest share of an element's bound 0.34); accumulating all of K in the tensor core
    (fast_accumulation.cu) is not, at every check K (3.3e-4 at K = 512 and more as K grows)."""
    kind = problem("fp8_scaled_gemm")
    a, b, sa, sb = ins = inputs("fp8_scaled_gemm", (64, 64, k), seed=11)
    expected = SERVING.fp8_reference(ins)
    scale = sa.float() * sb.float()
    frobenius = {}
    for promote in (64, 128, k):
        out = fp8_tensor_core_product(a, b, promote) * scale
        frobenius[promote] = kind.accuracy(out, expected)["frobenius_rel_error"]
        assert (verdict(kind, out, expected) == "") == (promote < k), promote
    rtol = SERVING.FP8_FROBENIUS_RTOL   # a factor 1.5 from each side
    assert frobenius[64] < 0.85e-4 < frobenius[128] < rtol / 1.5 and frobenius[k] > 1.5 * rtol


# ---- the baselines run on CPU tensors and leave the inputs alone ------------------------------------------------

@pytest.mark.parametrize("kind, shape", [("rmsnorm_residual", (3, 64)), ("swiglu", (3, 64)),
                                         ("paged_decode", PAGED)])
def test_the_unfused_baselines_run_and_change_nothing(kind, shape):
    ins = inputs(kind, shape)
    kept = [t.clone() for t in ins]
    problem(kind).baseline(torch.empty(1), ins)
    assert all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(ins, kept))


# ---- the kernels ----------------------------------------------------------------------------------------------

def compiled(kernel_id: str, source: str):
    kernel = SPEC.kernel(kernel_id)
    return compile_cuda(source, kernels=(kernel.function,), defines=kernel.geometry.defines(),
                        arch=kernel.launch.arch or "sm_90")


@pytest.mark.parametrize("name", [*ORDER, *BUGS])
def test_compiles_without_spills(name):
    kid, path = (name, SPEC.kernel(name).reference) if name in ORDER else (BUGS[name], WRONG[name])
    usage = compiled(kid, path.read_text()).resources[SPEC.kernel(kid).function]
    assert usage.spill_stores == usage.spill_loads == usage.stack_bytes == 0


def test_known_wrong_solutions_name_their_steps_and_zero_points():
    steps = BUGS | {"compile_error": "swiglu"}
    assert {name: tracks.graded_kernel(path) for name, path in WRONG.items()} == steps
    for name, path in WRONG.items():
        assert tracks.expected_points(path)[f"{steps[name]}_score"].matches(0.0)
        assert tracks.expected_statuses(path) == (("compile_error",) if name == "compile_error" else ("incorrect",))


def test_cuda_bf16_h_is_not_in_nvrtc():
    with pytest.raises(CompileError, match='identifier "__nv_bfloat16" is undefined'):
        compiled("swiglu", WRONG["compile_error"].read_text())


@pytest.fixture(scope="module")
def previews() -> dict:
    jobs = {kid: Job(k, k.reference) for kid, k in SPEC.kernels.items()}
    jobs |= {name: Job(SPEC.kernel(kid), WRONG[name]) for name, kid in BUGS.items()}
    return run_all(jobs)


@pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")
def test_the_cpu_preview_finds_every_reference_right(previews):
    for kid in ORDER[:-1]:
        assert previews[kid].verdict == "correct", previews[kid].line


@pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")
def test_the_cpu_preview_finds_every_known_wrong_solution_wrong(previews):
    for name in BUGS.keys() - FP8_BUGS:
        assert (previews[name].verdict, previews[name].finding) == ("wrong", "incorrect"), previews[name].line
    assert "are NaN" in previews["contiguous_table"].line
    assert "pairs too far from the fp32 reference" in previews["page_boundary"].line
    assert "values of y wrong" in previews["nibbles_swapped"].line


@pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")
@pytest.mark.parametrize("name", ["fp8_gemm", *FP8_BUGS])
def test_the_cpu_preview_says_it_cannot_run_the_fp8_wgmma_kernels(previews, name):
    """As for the Hopper track's kernels: no dynamic shared memory, wgmma or TMA in the emulation."""
    assert (previews[name].verdict, previews[name].finding) == ("cannot_run", "unsupported")
    assert previews[name].line == (
        "? fp8_gemm: the CPU preview cannot run this kernel: it uses dynamic shared memory (extern __shared__), which "
        "the CPU preview does not emulate (the grader launches with it where the spec gives dynamic_smem); the GPU "
        "worker grades it")


# ---- prefill against decode: the questions and their key -----------------------------------------------------------

def test_every_choice_has_its_answer_among_its_options_and_every_question_a_key():
    questions = SERVING.QUESTIONS
    key = answer_key("serving")
    assert sorted(key) == sorted(q.id for q in questions) and len(questions) == 7
    assert all(key[q.id] in q.options for q in questions if isinstance(q, Choice))


@pytest.mark.parametrize("student", ["reference", "s1", "s2", "s3"])
def test_the_numeric_answers_are_the_layers_roofline(student):
    """Recomputed here from each student's numbers: T = 1 about 1 FLOP/byte, T = 4096 over a thousand; at the
    crossover the intensity is the ridge point; each floor the larger of the bytes' and the FLOPs' time."""
    found = {q.id: (numbers("serving", q, student), right_answer("serving", q, student))
             for q in SERVING.QUESTIONS if isinstance(q, Numeric)}

    def intensity(t, g):
        return 2 * t * g["n"] * g["k"] / (2 * (g["n"] * g["k"] + t * g["k"] + t * g["n"]))

    g, answer = found["decode_intensity"]
    assert 0.99 < answer < 1 and answer == pytest.approx(intensity(1, g), rel=1e-12)
    g, answer = found["prefill_intensity"]
    assert answer > 1000 and answer == pytest.approx(intensity(4096, g), rel=1e-12)
    g, answer = found["crossover_tokens"]
    assert intensity(answer, g) == pytest.approx(g["p"] / g["b"], rel=1e-9) and answer < 4096
    for qid, t, bound in (("decode_floor", 1, "bytes"), ("prefill_floor", 4096, "flops")):
        g, answer = found[qid]
        by_bytes = 2 * (g["n"] * g["k"] + t * g["k"] + t * g["n"]) / (g["b"] * 1e12) * 1e6
        by_flops = 2 * t * g["n"] * g["k"] / (g["p"] * 1e12) * 1e6
        assert answer == pytest.approx(max(by_bytes, by_flops), rel=1e-12)
        assert (by_bytes > by_flops) == (bound == "bytes")


def test_the_tolerance_takes_a_rounded_answer_and_refuses_an_intensity_off_by_the_bytes_per_value():
    q = next(q for q in SERVING.QUESTIONS if q.id == "prefill_intensity")
    right = right_answer("serving", q, "reference")
    assert is_right(q, round(right, 1), right) and not is_right(q, right / 2, right)   # fp32's 4 bytes, not bf16's 2
