"""The NVFP4 GEMV journey without a GPU: its spec and kind (the decode against independent ones, the reference, the
tolerance, the roofline copy), every reference and known-wrong solution compiled for its arch with the SASS its step
asks for, the CPU preview of every step it can run (the references right, each known-wrong one wrong where its bug
shows), and the Blackwell questions' key. Speed, the clustered steps' split and the grading of the whole notebook need the GPU:
tests/gpu/test_nvfp4_gpu.py."""
from __future__ import annotations

import math
import re
import struct

import pytest
import torch
from previews import HAVE_GXX, Job, run_all

from graders import tracks
from graders.cuda_engine import preview, sass
from graders.cuda_engine.child import verdict
from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec, make_geometry
from graders.quiz_engine.grade import answer_key

TRACK = tracks.get("nvfp4")
SPEC = load_spec("nvfp4")
KIND = problem("nvfp4_gemv")
NVFP4 = TRACK.problem_module()
ORDER = ["naive", "coalesced", "decode", "warp", "smem", "cluster", "registers", "stream"]
SPLITS = {"cluster": 4, "registers": 4, "stream": 2}   # the clustered steps: blocks (one cluster) sharing a row's K
CLUSTERED = tuple(SPLITS)
STAGED = ("smem", "cluster", "registers")   # x staged in shared memory
WRONG = {p.stem: p for p in TRACK.wrong_solutions()}
BUGS = {"sign_dropped": "decode", "scale_per_32": "warp", "k_tail_dropped": "smem", "compile_error": "decode",
        "neighbour_sign": "stream"}

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


def opcodes(text: str, opcode: str) -> int:
    """How many instructions of ``text`` (SASS) are ``opcode`` with any modifiers after it ("LDG.E.128":
    LDG.E.128.CONSTANT too, not LDG.E)."""
    return sum(1 for m in re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", text, re.MULTILINE)
               if m == opcode or m.startswith(opcode + "."))


def compiled_as(kernel_id: str, source: str):
    kernel = SPEC.kernel(kernel_id)
    return compile_cuda(source, kernels=(kernel.function,), defines=kernel.geometry.defines(),
                        arch=kernel.launch.arch or "sm_90")


def inputs(shape, seed=0):
    return KIND.make_inputs(shape, torch.Generator().manual_seed(seed))


# ---- the spec -----------------------------------------------------------------------------------------------------

def test_spec_lists_the_journeys_steps_in_order():
    assert list(SPEC.kernels) == ORDER and SPEC.targets == "provisional"
    assert all(k.kind == "nvfp4_gemv" and k.perf_shape == (4096, 32768) for k in SPEC.kernels.values())
    assert [k.sass_requirements for k in SPEC.kernels.values()] == [()] + [("ldg128",)] * 7
    assert [k.floor < k.target for k in SPEC.kernels.values()] == [True] * 8
    for kernel in SPEC.kernels.values():
        launch = ((SPLITS[kernel.id], 1), "sm_90") if kernel.id in CLUSTERED else (None, None)
        assert (kernel.launch.cluster, kernel.launch.arch) == launch


def test_the_grid_splits_k_only_in_the_clustered_steps():
    """TILE_X / 256 blocks share a row group's K: 1 but in the clustered steps, whose 4 (cluster, registers) or 2
    (stream) are one cluster at every shape."""
    for kernel in SPEC.kernels.values():
        g = kernel.geometry
        for m, k in (*kernel.check_shapes, kernel.perf_shape):
            assert k % 64 == 0
            grid = KIND.grid((m, k), g.tile)
            assert grid == (SPLITS.get(kernel.id, 1), -(-m // g.tile[1]), 1)


def test_check_shapes_show_each_tail():
    """One row, a row shorter than a warp's stride, K not a multiple of a warp's 1024 or the staged 2048, M not a
    multiple of any tile."""
    shapes = SPEC.kernel("naive").check_shapes
    assert (1, 64) in shapes and any(k % 1024 for _, k in shapes) and any(k > 2048 and k % 2048 for _, k in shapes)
    assert all(any(m % k.geometry.tile[1] for m, _ in shapes) for k in SPEC.kernels.values() if k.geometry.tile[1] > 1)


# ---- the format: the grader's decode against independent ones -------------------------------------------------------

def test_e4m3_decode_is_torchs_float8_e4m3fn_for_every_byte():
    bits = torch.arange(256, dtype=torch.uint8)
    ours, torchs = NVFP4.e4m3(bits), bits.view(torch.float8_e4m3fn).double()
    assert torch.equal(torch.isnan(ours), torch.isnan(torchs)) and int(torch.isnan(ours).sum()) == 2
    finite = ~torch.isnan(torchs)
    assert torch.equal(ours[finite], torchs[finite])
    low, high = NVFP4.SCALE_BYTES
    assert (float(ours[low]), float(ours[high])) == (2.0 ** -6, 448.0)


def test_e2m1_table_is_the_formats_definition():
    """From the OCP microscaling spec's fields: sign, 2 exponent bits with bias 1, 1 mantissa bit; exponent 0 is
    subnormal (0 and 0.5)."""
    for code in range(16):
        sign, exponent, mantissa = code >> 3, (code >> 1) & 3, code & 1
        value = mantissa / 2 if exponent == 0 else 2.0 ** (exponent - 1) * (1 + mantissa / 2)
        assert NVFP4.E2M1[code] == (-value if sign else value)
        assert math.copysign(1, NVFP4.E2M1[code]) == (-1 if sign else 1)   # 8 is -0
    assert float(NVFP4.e2m1(torch.tensor([7, 15, 1])).sum()) == 0.5


def _bits(value: int) -> float:
    return struct.unpack("<f", struct.pack("<I", value))[0]


def test_the_kernels_bit_tricks_decode_every_code():
    """The references' decode: code c's fields moved into a float (sign to bit 31, the rest to bits 24-22) times
    2^126; an e4m3 byte's (sign to bit 31, the rest to bits 26-20) times 2^120, subnormals included."""
    for code in range(16):
        assert _bits(((code & 8) << 28) | ((code & 7) << 22)) * 2.0 ** 126 == NVFP4.E2M1[code]
    e4m3 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double()
    for b in [b for b in range(256) if b & 0x7F != 0x7F]:
        assert _bits(((b & 0x80) << 24) | ((b & 0x7F) << 20)) * 2.0 ** 120 == float(e4m3[b]), hex(b)
    source = SPEC.kernel("decode").reference.read_text()
    assert "((c & 8u) << 28) | ((c & 7u) << 22)) * 0x1p126f" in source
    assert "((b & 0x80u) << 24) | ((b & 0x7Fu) << 20)) * 0x1p120f" in source


def test_unpack_takes_the_even_value_from_the_low_nibble():
    w = torch.tensor([[0x21, 0xF8]], dtype=torch.uint8)
    assert NVFP4.unpack(w).tolist() == [[1, 2, 8, 15]]


# ---- the kind: inputs, reference, tolerance, roofline -------------------------------------------------------------

def test_inputs_are_packed_codes_block_scales_a_tensor_scale_and_x():
    w, scales, tensor_scale, x = inputs((37, 1088))
    assert (w.dtype, tuple(w.shape), scales.dtype, tuple(scales.shape)) == (torch.uint8, (37, 544), torch.uint8,
                                                                            (37, 68))
    assert (tensor_scale.dtype, tensor_scale.numel(), x.dtype, tuple(x.shape)) == (torch.float32, 1, torch.float32,
                                                                                  (1088,))
    low, high = NVFP4.SCALE_BYTES
    assert int(scales.min()) >= low and int(scales.max()) <= high and len(scales.unique()) > 60
    assert 1e-3 <= float(tensor_scale) < 1e-2
    # weights then scales in one buffer, the copy the roofline makes
    assert w.untyped_storage().data_ptr() == scales.untyped_storage().data_ptr()
    assert scales.data_ptr() - w.data_ptr() == w.numel() and w.untyped_storage().nbytes() == w.numel() + scales.numel()


def test_the_reference_is_the_float64_product_of_the_dequantised_matrix():
    """Against a decode element by element in Python, from the tables above."""
    w, scales, tensor_scale, x = inputs((5, 64), seed=3)
    expected = KIND.reference([w, scales, tensor_scale, x])
    e4m3 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double().tolist()
    for m in range(5):
        total = magnitude = 0.0
        for k in range(64):
            byte = int(w[m, k // 2])
            code = byte & 15 if k % 2 == 0 else byte >> 4
            term = NVFP4.E2M1[code] * e4m3[int(scales[m, k // 16])] * float(tensor_scale) * float(x[k])
            total, magnitude = total + term, magnitude + abs(term)
        assert math.isclose(float(expected.exact[m]), total, rel_tol=1e-12, abs_tol=1e-300)
        assert math.isclose(float(expected.magnitude[m]), magnitude, rel_tol=1e-12)


def test_the_reference_in_chunks_of_rows_is_the_whole_products(monkeypatch):
    ins = inputs((37, 1088), seed=2)
    whole = NVFP4.dequantise(*ins[:3]) * ins[3].double()
    for chunk in (1, 3 * 1088, 1 << 24):   # a row a chunk, three rows, every row at once
        monkeypatch.setattr(NVFP4, "CHUNK_VALUES", chunk)
        found = KIND.reference(ins)
        assert torch.equal(found.exact, whole.sum(dim=1)) and torch.equal(found.magnitude, whole.abs().sum(dim=1))


def test_fp32_accumulation_in_any_order_passes_and_each_known_bug_fails():
    """The tolerance holds an fp32 sequential sum at the longest check row and one of blocks of 16 scaled after;
    the decode bugs of the known-wrong solutions, emulated here, are far outside it at every check shape."""
    for shape in [(8, 65536), (37, 1088), (1, 64)]:
        w, scales, tensor_scale, x = ins = inputs(shape, seed=1)
        expected = KIND.reference(ins)
        codes = NVFP4.unpack(w)
        blocks = NVFP4.e4m3(scales).float()
        terms = (NVFP4.e2m1(codes).float() * blocks.repeat_interleave(16, dim=1)) * tensor_scale * x
        sequential = torch.zeros(shape[0])
        for k in range(0, shape[1], 4096):   # fp32 partial sums, added in order
            sequential += terms[:, k:k + 4096].sum(dim=1)
        assert verdict(KIND, sequential, expected) == ""
        by_block = (NVFP4.e2m1(codes).float() * x).view(shape[0], -1, 16).sum(dim=2)
        assert verdict(KIND, (by_block * blocks).sum(dim=1) * tensor_scale, expected) == ""

        unsigned = NVFP4.e2m1(codes & 7) * NVFP4.e4m3(scales).repeat_interleave(16, dim=1) * tensor_scale.double()
        per_32 = NVFP4.e4m3(scales[:, ::2]).repeat_interleave(32, dim=1)
        for wrong in (unsigned @ x.double(), (NVFP4.e2m1(codes) * per_32 * tensor_scale.double()) @ x.double()):
            assert verdict(KIND, wrong.float(), expected).startswith(f"{shape[0]} of {shape[0]} values of y wrong")


def test_an_unwritten_value_fails_as_never_written():
    ins = inputs((37, 1088))
    expected = KIND.reference(ins)
    out = expected.exact.float()
    out[36] = float("nan")
    assert verdict(KIND, out, expected).startswith("1 of 37 values of y wrong; first y[36]: ")
    assert "(NaN: never written, or made from one)" in verdict(KIND, out, expected)


def test_the_roofline_copies_the_weights_and_scales_bytes_and_nothing_else():
    w, scales, tensor_scale, x = ins = inputs((64, 2048))
    whole = torch.tensor([], dtype=torch.uint8).set_(w.untyped_storage()).clone()
    x_before = x.clone()
    KIND.baseline(torch.empty(64), ins)
    after = torch.tensor([], dtype=torch.uint8).set_(w.untyped_storage())
    half = whole.numel() // 2
    assert torch.equal(after[half:2 * half], whole[:half]) and torch.equal(after[:half], whole[:half])
    assert torch.equal(x, x_before)
    moved = 2 * half   # read and written
    assert moved == w.numel() + scales.numel()
    assert KIND.work((64, 2048)) - moved == 4 + 4 * 2048 + 4 * 64   # the tensor scale, x and y
    assert KIND.roof == "dram" and KIND.sass_requirements == ("no_global_scratch",)


# ---- the kernels: compiled, SASS -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def references() -> dict:
    return {kid: compiled_as(kid, k.reference.read_text()) for kid, k in SPEC.kernels.items()}


@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_compiles_without_spills(references, kernel_id):
    usage = references[kernel_id].resources[SPEC.kernel(kernel_id).function]
    assert usage.spill_stores == usage.spill_loads == 0 and usage.stack_bytes == 0


def test_known_wrong_solutions_replace_the_kernels_their_bugs_are_in():
    assert {name: tracks.graded_kernel(path) for name, path in WRONG.items()} == BUGS
    for name, path in WRONG.items():
        assert tracks.expected_points(path)[f"{BUGS[name]}_score"].matches(0.0)
        assert tracks.expected_statuses(path) == (("compile_error",) if name == "compile_error" else ("incorrect",))


@pytest.mark.parametrize("name", [n for n in BUGS if n != "compile_error"])
def test_known_wrong_solution_compiles(name):
    kid = BUGS[name]
    usage = compiled_as(kid, WRONG[name].read_text()).resources[SPEC.kernel(kid).function]
    assert usage.spill_stores == 0


def test_cuda_fp4_h_is_not_in_nvrtc_and_its_instruction_is_blackwells():
    with pytest.raises(CompileError, match='identifier "__nv_fp4x2_storage_t" is undefined'):
        compiled_as("decode", WRONG["compile_error"].read_text())
    ptx = ('__device__ unsigned decode(unsigned b) { unsigned h; asm("{ .reg .b8 q; cvt.u8.u32 q, %1; '
           'cvt.rn.f16x2.e2m1x2 %0, q; }" : "=r"(h) : "r"(b)); return h; }\n'
           'extern "C" __global__ void k(unsigned* o) { o[0] = decode(o[1]); }')
    with pytest.raises(CompileError, match="not supported on .target 'sm_90'"):
        compile_cuda(ptx, kernels=("k",), arch="sm_90")


@pytest.fixture(scope="module")
def disassembled(references) -> dict:
    """Each reference's SASS (nvdisasm, once) and resource usage."""
    found = {}
    for kid, compiled in references.items():
        function = SPEC.kernel(kid).function
        found[kid] = (sass.disassemble(compiled.cubin)[function], sass.resource_usage(compiled.cubin)[function])
    return found


def unmet(disassembled, kernel_id: str, requirements) -> list[str]:
    """The grader's sentences for the requirements the reference misses (`graders.cuda_engine.sass.check`'s)."""
    text, usage = disassembled[kernel_id]
    return [found for found in (sass.REQUIREMENTS[r][0](text, usage) for r in requirements) if found]


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_sass_shows_what_its_step_teaches(disassembled, kernel_id):
    kernel = SPEC.kernel(kernel_id)
    assert unmet(disassembled, kernel_id, (*KIND.sass_requirements, *kernel.sass_requirements, "no_local")) == []
    text = disassembled[kernel_id][0]
    count = {op: opcodes(text, op) for op in ("LDG.E.128", "LDG.E.U8", "SHFL.BFLY", "BAR.SYNC", "LDS", "LDS.128",
                                                "UCGABAR_ARV", "UCGABAR_WAIT", "LD.E", "HADD2.F32", "F2FP.F16.E4M3")}
    assert (count["LDG.E.128"] > 0) == (kernel_id != "naive")        # 16-byte loads from the coalesced step on
    assert (count["LDG.E.U8"] > 0) == (kernel_id in ("naive", "coalesced"))   # scales a byte at a time, per value
    assert (count["SHFL.BFLY"] > 0) == (kernel_id in ("warp", "smem", *CLUSTERED))   # warp reductions
    assert (count["LDS.128"] > 0) == (kernel_id in STAGED)   # x from shared memory, a float4 at a time
    # the table: a 32-bit shared load a value (32 a chunk) from the decode step until the registers step (the stream
    # step's LDS are its epilogue's, outside its main loop: test_the_stream_steps_sass_decodes_through_fp16)
    if kernel_id != "stream":
        assert (count["LDS"] - count["LDS.128"] >= 32) == (kernel_id in ("decode", "warp", "smem", "cluster"))
    # the stream step's decode: codes and scales through fp16 (cvt.f32.f16, cvt.rn.f16x2.e4m3x2)
    assert (count["HADD2.F32"] > 0, count["F2FP.F16.E4M3"] > 0) == ((kernel_id == "stream",) * 2)
    # two cluster barriers (arrive and wait each) and loads from the other blocks' shared memory (generic LD)
    assert (count["UCGABAR_ARV"], count["UCGABAR_WAIT"]) == ((2, 2) if kernel_id in CLUSTERED else (0, 0))
    assert (count["LD.E"] > 0) == (kernel_id in CLUSTERED)


def main_loop(text: str) -> list[str]:
    """The opcodes of the SASS loop (a backward branch and the instructions from its target to it) with the most
    FFMAs: a kernel's main loop."""
    lines = [(int(a, 16), op) for a, op in re.findall(r"^\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+[^;]*);",
                                                       text, re.MULTILINE)]
    loops = []
    for at, op in lines:
        branch = re.match(r"BRA (?:\S+, )?0x([0-9a-f]+)", op)
        if branch and int(branch.group(1), 16) < at:
            loops.append([o.split()[0] for a, o in lines if int(branch.group(1), 16) <= a <= at])
    return max(loops, key=lambda ops: sum(o == "FFMA" for o in ops))


@needs_sass_tools
def test_the_stream_steps_sass_decodes_through_fp16(disassembled):
    """Its main loop, a group of 8 rows x 32 codes = 256 values a thread: a cvt.f32.f16 (HADD2.F32) and an FFMA for
    each value, 4 PRMT a word of 8 codes, the scales through F2FP.F16.E4M3, no load of x or a table from shared
    memory (one LDS: a row group's partial sums), and under 4 instructions a value."""
    loop = main_loop(disassembled["stream"][0])
    count = {op: sum(o == op or o.startswith(op + ".") for o in loop)
             for op in ("HADD2.F32", "FFMA", "PRMT", "F2FP.F16.E4M3", "LDS", "LDG.E.128")}
    assert count["HADD2.F32"] >= 256 and count["FFMA"] >= 256 and count["PRMT"] == 128, count
    assert count["F2FP.F16.E4M3"] > 0 and count["LDG.E.128"] == 8 and count["LDS"] <= 1, count
    assert len(loop) < 4 * 256, len(loop)


@needs_sass_tools
def test_the_naive_step_misses_the_vectorised_loads_the_later_steps_must_have(disassembled):
    (failure,) = unmet(disassembled, "naive", ("ldg128",))
    assert "no 128-bit global load" in failure


# ---- the CPU preview: what it can run -----------------------------------------------------------------------------

def unclustered(source: str) -> str:
    """A clustered step's source for one block a row group (run with TILE_X = 256, SPLITS = 1): its cluster barrier a
    __syncthreads() (which it also is), its rank 0, no remote loads; and the stream step's two helpers that only steer
    NVRTC's code (an empty asm, a lop3 with LUT 0xE4) their C meaning. The CPU preview can run it: any inline PTX left
    is in the helpers it emulates (the stream step's fp16 conversions)."""
    steering = (("unsigned opaque(unsigned v)", "return v;"),
                ("unsigned bitselect(unsigned a, unsigned b, unsigned mask)", "return (a & mask) | (b & ~mask);"))
    for function, body in (("void cluster_sync()", "__syncthreads();"), ("unsigned cluster_rank()", "return 0;"),
                           ("float remote_load(const float* p, unsigned rank)", "return 0.0f;"), *steering):
        source, found = re.subn(rf"(__device__ __forceinline__ {re.escape(function)}\n\{{\n).*?\n\}}",
                                rf"\g<1>    {body}\n}}", source, flags=re.DOTALL)
        assert found == 1 or (found == 0 and (function, body) in steering), function
    with_asm = {re.search(r"(\w+)\(", part[part.index("__device__"):]).group(1)
                for part in source.split("\n}\n") if re.search(r"\basm\s*(volatile\s*)?\(", part)}
    assert with_asm <= set(preview.EMULATED_PTX), with_asm
    return source


@pytest.fixture(scope="module")
def previews(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("unclustered")
    jobs = {kid: Job(k, k.reference) for kid, k in SPEC.kernels.items()}
    jobs |= {name: Job(SPEC.kernel(kid), WRONG[name]) for name, kid in BUGS.items()
             if name != "compile_error" and kid not in CLUSTERED}
    for name, source in [(kid, SPEC.kernel(kid).reference) for kid in CLUSTERED] + [
            (name, WRONG[name]) for name, kid in BUGS.items() if kid in CLUSTERED]:
        kernel = SPEC.kernel(BUGS.get(name, name))
        (folder / f"{name}.cu").write_text(unclustered(source.read_text()))
        geometry = make_geometry(kernel.geometry.block, (256, 16))
        jobs[f"{name} unclustered"] = Job(kernel, folder / f"{name}.cu", geometry)
    return run_all(jobs)


@pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")
def test_the_cpu_preview_runs_every_step_but_the_clustered_ones(previews):
    for kid in ORDER:
        if kid not in CLUSTERED:
            assert previews[kid].verdict == "correct", previews[kid].line
    for kid in CLUSTERED:
        found = previews[kid]
        assert (found.verdict, found.finding) == ("cannot_run", "unsupported")
        assert "inline PTX (`barrier.cluster.arrive.release.aligned` in cluster_sync)" in found.line, found.line


@pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")
def test_the_clustered_steps_with_one_block_a_row_group_are_correct_in_the_cpu_preview(previews):
    """Everything but the split and the distributed shared memory: the staging, the decode (the registers step's
    without a table, x times 2^63; the stream step's through fp16 bytes, its clamped loads and shuffles), the block
    scales, the partials through shared memory, the tensor scale."""
    for kid in CLUSTERED:
        found = previews[f"{kid} unclustered"]
        assert found.verdict == "correct" and len(found.shapes) == 3, found.line


@pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")
def test_the_cpu_preview_finds_each_known_wrong_solution_wrong_at_one_row_of_64(previews):
    for name in ("sign_dropped", "scale_per_32", "k_tail_dropped", "neighbour_sign unclustered"):
        found = previews[name]
        assert (found.verdict, found.finding, found.shape) == ("wrong", "incorrect", (1, 64)), found.line
        assert "1 of 1 values of y wrong; first y[0]: " in found.line


def test_the_registers_steps_decode_is_every_codes_value():
    """``((int)(code << 28) >> 6) & 0x81C00000`` as a float: the value times 2^-126 (x staged times 2^63, y times
    2^63 back)."""
    for code in range(16):
        shifted = ((code << 28) - (1 << 32) if code & 8 else code << 28) >> 6   # an arithmetic shift
        assert _bits(shifted & 0x81C00000) * 2.0 ** 126 == NVFP4.E2M1[code]
    source = SPEC.kernel("registers").reference.read_text()
    assert "__int_as_float(((int)top >> 6) & (int)0x81C00000)" in source and "tensor_scale[0] * 0x1p63f" in source


def fp16_value(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def byte_perm(x: int, y: int, selector: int) -> int:
    """__byte_perm(x, y, selector): result byte i is byte (selector nibble i) of the 8 bytes y:x (x the low four)."""
    pool = (y << 32 | x).to_bytes(8, "little")
    return int.from_bytes(bytes(pool[(selector >> 4 * i) & 7] for i in range(4)), "little")


def stream_decode(w: int, sign_shift: int = 4) -> list[float]:
    """The stream step's decode of a word of 8 codes, an integer instruction at a time: each code as the high byte of
    an fp16 (its value times 2^-14), the codes in order. ``sign_shift`` 0 is the neighbour_sign solution's bug."""
    mask, full = 0x0E0E0E0E, 0xFFFFFFFF
    s = w & 0x88888888
    odd = ((w >> 3) & mask) | (s & ~mask & full)
    even = ((w << 1) & mask) | ((s << sign_shift) & ~mask & full)
    halves = {}
    for name, word in (("even", even), ("odd", odd)):
        for selector, codes in ((0x1404, (0, 2)), (0x3424, (4, 6))):
            pair = byte_perm(word, 0, selector)
            for half, code in zip((pair & 0xFFFF, pair >> 16), codes):
                halves[code + (name == "odd")] = fp16_value(half)
    return [halves[n] for n in range(8)]


def test_the_stream_steps_decode_is_every_codes_value_in_every_place():
    """Every byte value in each byte of a word (the other bytes 0x00, 0xFF or 0x5A), each code its value times
    2^-14 as an fp16 (code 1 the subnormal 2^-15), the sign of -0 kept; the sign word unshifted for the even codes
    (the neighbour_sign solution) gives the even code its odd neighbour's sign."""
    for place in range(4):
        for fill in (0x00, 0xFF, 0x5A):
            for byte in range(256):
                w = int.from_bytes(bytes(byte if b == place else fill for b in range(4)), "little")
                codes = [(w >> 4 * n) & 15 for n in range(8)]
                found = stream_decode(w)
                for code, value in zip(codes, found):
                    assert value * 2.0 ** 14 == NVFP4.E2M1[code], (hex(w), code, value)
                    assert math.copysign(1, value) == math.copysign(1, NVFP4.E2M1[code]), (hex(w), code)
    # byte 0xF1: code 0 is 1 (0.5), code 1 is 15 (-6); unshifted, code 0 takes code 1's sign
    assert stream_decode(0xF1, sign_shift=0)[0] * 2.0 ** 14 == -0.5 and stream_decode(0xF1)[0] * 2.0 ** 14 == 0.5
    source = SPEC.kernel("stream").reference.read_text()
    assert "bitselect(w << 1, s << 4, 0x0E0E0E0Eu)" in source and "bitselect(w >> 3, s, 0x0E0E0E0Eu)" in source
    assert "__byte_perm(even, 0u, 0x1404)" in source and "__byte_perm(odd, 0u, 0x3424)" in source
    assert "tensor_scale[0] * 0x1p14f" in source
    assert "bitselect(w << 1, s, 0x0E0E0E0Eu)" in WRONG["neighbour_sign"].read_text()


def test_every_finite_e4m3_scale_is_an_fp16():
    """The stream step's scales: cvt.rn.f16x2.e4m3x2 then cvt.f32.f16 is exact for every finite e4m3 byte."""
    e4m3 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)
    finite = ~torch.isnan(e4m3.float())
    assert torch.equal(e4m3.half().double()[finite], NVFP4.e4m3(torch.arange(256, dtype=torch.uint8))[finite])


# ---- the Blackwell part -------------------------------------------------------------------------------------------

def test_every_question_has_its_answer_among_its_options():
    key = answer_key("nvfp4")
    questions = NVFP4.QUESTIONS
    assert sorted(key) == sorted(q.id for q in questions) and len(questions) == 9
    assert all(key[q.id] in q.options for q in questions)
    assert len(set(key.values())) == 4   # the right answers are not all one letter


def test_the_notebook_says_the_h200_cannot_run_the_blackwell_part():
    import nbformat
    cells = nbformat.read(str(TRACK.notebook_path), as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "**The H200 (sm_90) cannot run anything in this part**" in text
    assert "2000 µs to 22.3 µs: 90x" in text
    graded = [c.metadata.nbgrader["grade_id"] for c in cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded == [f"{kid}_score" for kid in ORDER] + [f"{q.id}_score" for q in NVFP4.QUESTIONS]
