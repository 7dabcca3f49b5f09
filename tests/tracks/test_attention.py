"""The attention track on CPU: its spec loads and each reference (and known-wrong solution) compiles for
sm_90 through the engine; the reference math of tracks/attention/problem.py on CPU tensors, each
correctness rule at its edge, and the causal alignment against PyTorch's own ``is_causal``; the tensor-core
step's SASS (sm_90 cubin: mma.sync bf16 HMMA, ldmatrix, cp.async, no local memory) and its structural
check. (That the committed notebook is what ``workshop build`` writes is tests/tracks/test_tracks.py's, for
every track; that the kernels compute the right thing, tests/tracks/test_attention_emulated.py's.)
"""
from __future__ import annotations

import functools
import math

import pytest
import torch

from graders import tracks
from graders.cuda_engine import counters, sass
from graders.cuda_engine.compile import DEFAULT_ARCH, CompileError, compile_cuda
from graders.cuda_engine.grade import KernelFailed, check_compiles
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import CounterRule, load_spec
from graders.cuda_engine.structure import check_sass, load_structure

SPEC = load_spec("attention")
TRACK = tracks.get("attention")
STRUCTURE_CHECKS = load_structure("attention").checks
attention = TRACK.problem_module()

needs_sass_tools = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                      reason="needs cuobjdump and nvdisasm")


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_every_kernel_names_a_kind_of_this_track():
    assert {k.kind for k in SPEC.kernels.values()} == {p.kind for p in attention.PROBLEMS}


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_compiles_for_sm_90(kernel_id, capsys):
    kernel = SPEC.kernel(kernel_id)
    resources = check_compiles("attention", kernel_id, kernel.reference.read_text())
    assert DEFAULT_ARCH == "sm_90" and "compiles for sm_90" in capsys.readouterr().out
    usage = resources[kernel.function]
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.name)
def test_known_wrong_solution_compiles_unless_it_is_the_compile_error_and_expects_its_points(path):
    """Wrong ones score 0; one that is correct but misses a rule of its step (status unmet) keeps its
    correctness points only."""
    kernel_id = tracks.graded_kernel(path)
    expected = tracks.expected_points(path)[f"{kernel_id}_score"]
    if path.name == "compile_error.cu":
        assert tracks.expected_statuses(path) == ("compile_error",) and expected.matches(0.0)
        with pytest.raises(CompileError, match='identifier "INFINITY" is undefined'):
            check_compiles("attention", kernel_id, path.read_text())
        return
    check_compiles("attention", kernel_id, path.read_text())
    status = tracks.expected_statuses(path)
    assert status in (("incorrect",), ("unmet",))
    assert expected.matches(SPEC.kernel(kernel_id).points_correct if status == ("unmet",) else 0.0)


# ---- row softmax ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(64, 257), (4, 1000), (2, 3), (1, 1)])
def test_softmax_inputs_hold_rows_that_overflow_and_rows_that_underflow_without_the_max(shape):
    (x,) = attention.softmax_logits(shape, generator())
    assert float(x[0].min()) > 89 and (shape[0] < 2 or float(x[1].max()) < -104)   # the first two rows, always
    naive = torch.exp(x) / torch.exp(x).sum(dim=1, keepdim=True)   # no max subtracted: inf/inf and 0/0
    expected = attention.softmax_reference([x])
    assert "of them NaN" in attention.softmax_mismatch(naive, expected)
    assert attention.softmax_mismatch(torch.softmax(x, dim=1), expected) == ""


def test_softmax_mismatch_counts_the_nans_where_the_first_wrong_value_is_not_one():
    expected = torch.full((2, 4), 0.25, dtype=torch.float64)
    out = expected.float()
    out[0, 1], out[1, 2], out[1, 3] = 0.0, math.nan, math.nan
    assert attention.softmax_mismatch(out, expected).startswith("3 of 8 probabilities")
    assert "first at out[0][1]: expected 0.25, got 0; 2 of them NaN" in attention.softmax_mismatch(out, expected)


def test_softmax_tolerance_at_its_edge():
    out = torch.ones(1, 1)
    just_inside = torch.tensor([[1 / (1 + 0.99 * attention.SOFTMAX_RTOL)]], dtype=torch.float64)
    just_outside = torch.tensor([[1 / (1 + 1.01 * attention.SOFTMAX_RTOL)]], dtype=torch.float64)
    assert attention.softmax_mismatch(out, just_inside) == ""
    assert "1 of 1 probabilities" in attention.softmax_mismatch(out, just_outside)
    assert "NaN" in attention.softmax_mismatch(torch.full((1, 1), math.nan), just_inside)


# ---- attention ------------------------------------------------------------------------------------------

def shaped(shape, causal=False):
    """Inputs and the reference of a forward shape (batch, heads, seq_q, seq_k, head_dim)."""
    inputs = attention.qkv(*shape, generator())
    return inputs, attention.attention_reference(inputs, causal)


@pytest.mark.parametrize("seq_q, seq_k", [(5, 9), (9, 5), (7, 7)])
def test_causal_mask_is_upper_left_like_pytorchs_is_causal(seq_q, seq_k):
    q, k, v = (torch.randn(1, 2, n, 16, dtype=torch.float64, generator=generator(n)) for n in (seq_q, seq_k, seq_k))
    ours = attention.attention(q, k, v, causal=True)
    torchs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(ours, torchs, rtol=0, atol=1e-12)
    mask = attention.causal_mask(seq_q, seq_k, "cpu")
    assert bool(mask[0, 0]) and not bool(mask[0, 1]) and int(mask.sum()) == attention.unmasked_pairs(seq_q, seq_k, True)


@pytest.mark.parametrize("seq_q, seq_k", [(1, 1), (97, 97), (97, 1025), (1025, 97), (4096, 4096)])
def test_unmasked_pairs_count_the_mask(seq_q, seq_k):
    assert attention.unmasked_pairs(seq_q, seq_k, True) == int(attention.causal_mask(seq_q, seq_k, "cpu").sum())
    assert attention.unmasked_pairs(seq_q, seq_k, False) == seq_q * seq_k


def test_forward_work_counts_four_flops_per_pair_and_dim():
    shape = (4, 16, 4096, 4096, 128)
    assert problem("attention_forward").work(shape) == 4 * 4 * 16 * 4096 * 4096 * 128
    assert problem("attention_forward_causal").work(shape) == 4 * 4 * 16 * 128 * (4096 * 4097 // 2)
    assert problem("attention_decode").work((8, 32, 32768, 128)) == 8 * 32 * 128 * (4 * 32768 + 6)


def test_reference_is_fp32_attention_and_the_large_logit_head_would_overflow_without_the_max():
    inputs, expected = shaped((1, 3, 97, 33, 64))
    q, k, v = (t.double() for t in inputs)
    exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    reference_error = (expected.o.double() - exact).abs().amax(dim=(-2, -1))
    assert bool((reference_error < 0.01 * expected.torch_error).all())   # the fp32 reference is no yardstick's noise
    scores = (q @ k.transpose(-2, -1)) / 8
    assert float(scores[:, -1].max()) > 89 and float(scores[:, :-1].abs().max()) < 50
    assert expected.torch_error.shape == (1, 3) and bool((expected.torch_error > 0).all())


def test_pytorch_in_bf16_and_fp32_attention_pass_and_a_nan_fails():
    inputs, expected = shaped((2, 2, 97, 97, 128), causal=True)
    assert attention.attention_mismatch(attention.attention(*inputs, causal=True).float(), expected) == ""
    fp32 = attention.attention(*(t.float() for t in inputs), causal=True)
    assert attention.attention_mismatch(fp32, expected) == ""
    fp32[1, 0, 5, 3] = math.nan
    assert "NaN" in attention.attention_mismatch(fp32, expected)


def test_error_rule_at_its_edge_per_head():
    """The kernel's largest error in a (batch, head) may be 2 x PyTorch's bf16 error there + FP32_FLOOR, no
    more; a head with a large allowance does not lend it to another."""
    inputs, expected = shaped((1, 2, 33, 40, 64))
    allowed = attention.ERROR_FACTOR * expected.torch_error.double() + attention.FP32_FLOOR
    for head, factor, ok in [(0, 0.99, True), (0, 1.01, False), (1, 0.99, True), (1, 1.01, False)]:
        out = expected.o.clone()
        out[0, head, 7, 9] += float(allowed[0, head]) * factor
        message = attention.attention_mismatch(out, expected)
        assert (message == "") is ok, (head, factor, message)
        if not ok:
            assert f"batch 0, head {head}" in message and "out[0][%d][7][9]" % head in message
    out = expected.o.clone()
    out[0, 0, 0, 0] += float(allowed[0, 1]) * 0.99   # the large-logit head's allowance, in head 0
    assert float(allowed[0, 1]) > float(allowed[0, 0]) and "head 0" in attention.attention_mismatch(out, expected)


def test_decode_reference_is_one_query_against_the_cache():
    inputs = problem("attention_decode").make_inputs((2, 2, 300, 64), generator())
    assert [tuple(t.shape) for t in inputs] == [(2, 2, 1, 64), (2, 2, 300, 64), (2, 2, 300, 64)]
    expected = problem("attention_decode").reference(inputs)
    assert tuple(expected.o.shape) == problem("attention_decode").out_shape((2, 2, 300, 64))
    assert attention.attention_mismatch(attention.attention(*inputs, causal=False).float(), expected) == ""


def test_inputs_are_fenced_with_nan():
    q, k, v = attention.qkv(1, 2, 5, 7, 64, generator())
    for t in (q, k, v):
        whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
        assert t.storage_offset() == attention.INPUT_GUARD and bool(whole[:attention.INPUT_GUARD].isnan().all())
        assert bool(whole[attention.INPUT_GUARD + t.numel():].isnan().all()) and not bool(t.isnan().any())


# ---- the tensor-core step: what its compiled code must hold ---------------------------------------------

@functools.cache   # the same kernel's compile, shared by the tests that read it
def compiled(kernel_id: str, source: str | None = None):
    kernel = SPEC.kernel(kernel_id)
    text = source if source is not None else kernel.reference.read_text()
    return compile_cuda(text, kernels=(kernel.function,), defines=kernel.geometry.defines())


@needs_sass_tools
@pytest.mark.parametrize("check_id", sorted(STRUCTURE_CHECKS))
def test_every_structural_check_passes_its_reference(check_id, capsys):
    check = STRUCTURE_CHECKS[check_id]
    assert check_sass("attention", check_id, SPEC.kernel(check.kernel).reference.read_text()) == check.points
    assert f"{check_id}: ok" in capsys.readouterr().out


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", ["flash_tc", "flash_tc_causal"])
def test_tensor_core_reference_is_mma_sync_bf16_with_fp32_accumulators_in_its_sm_90_sass(kernel_id):
    done = compiled(kernel_id)
    assert DEFAULT_ARCH == "sm_90" and done.arch == "sm_90"
    failures, facts = sass.check(done.cubin, kernel_id, problem(SPEC.kernel(kernel_id).kind).sass_requirements)
    assert failures == [] and facts["resources"]["STACK"] == 0 and facts["resources"]["LOCAL"] == 0
    text = sass.disassemble(done.cubin)[kernel_id]
    mnemonics = sass._INSTRUCTION.findall(text)
    hmma = [m for m in mnemonics if m.startswith("HMMA")]
    assert hmma and set(hmma) == {"HMMA.16816.F32.BF16"}, set(hmma)
    # per key tile, at head_dim 128 and 64: Q K^T and P V are 64 + 64 and 32 + 32 mma.sync a warp
    assert len(hmma) == 192
    assert sass.opcode_count(text, "LDSM") > 0 and sass.opcode_count(text, "LDGSTS") > 0


@needs_sass_tools
def test_the_cuda_core_flash_kernel_misses_the_tensor_core_requirement():
    kernel = SPEC.kernel("flash_forward")
    done = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())
    failures, _ = sass.check(done.cubin, kernel.function, problem("attention_forward_tc").sass_requirements)
    assert len(failures) == 1 and failures[0].startswith("it does not use tensor cores")


@needs_sass_tools
@pytest.mark.parametrize("path", [p for p in TRACK.wrong_solutions()
                                  if set(tracks.expected_points(p)) & set(STRUCTURE_CHECKS)], ids=lambda p: p.name)
def test_known_wrong_solutions_get_their_structural_points(path):
    for check_id, expected in tracks.expected_points(path).items():
        if check_id in STRUCTURE_CHECKS:
            try:
                points = check_sass("attention", check_id, path.read_text())
            except KernelFailed:
                points = 0
            assert expected.matches(points), f"{check_id}: {points:g} points, expected {expected}"


# ---- causal: the masked tiles must be skipped (a counter rule) ------------------------------------------

def rows_times_tiles(kernel_id: str, causal: bool) -> int:
    """Query rows x key tiles the reference of ``kernel_id`` computes at its perf shape, at its own launch: per
    block of TILE_Y rows, every tile of TILE_X keys, or (causal) those up to the block's last row."""
    kernel = SPEC.kernel(kernel_id)
    batch, heads, seq_q, seq_k, _ = kernel.perf_shape
    keys, rows = kernel.geometry.tile
    ends = [min(seq_k, q0 + rows) if causal else seq_k for q0 in range(0, seq_q, rows)]
    return batch * heads * rows * sum(-(-end // keys) for end in ends)


@pytest.mark.parametrize("causal_id, metric, unmasked_id", [("flash_causal", "fp32_instructions", "flash_forward"),
                                                           ("flash_tc_causal", "tensor_instructions", "flash_tc")])
def test_causal_steps_need_their_work_at_most_0_6_of_the_unmasked_reference(causal_id, metric, unmasked_id):
    causal, unmasked = SPEC.kernel(causal_id), SPEC.kernel(unmasked_id)
    assert causal.counter == CounterRule(metric, unmasked_id, 0.6) and metric in counters.METRICS
    assert causal.perf_shape == unmasked.perf_shape   # each at its own launch: flash_tc_causal on 64-row blocks
    assert problem(causal.kind).work(causal.perf_shape) / problem(unmasked.kind).work(unmasked.perf_shape) < 0.51
    # skipping the tiles above the block's last row: about half the tiles; computing them all: every one
    share = rows_times_tiles(causal_id, True) / rows_times_tiles(unmasked_id, False)
    assert 0.5 < share < 0.52 < 0.6
    assert round(share, 3) == {"flash_causal": 0.504, "flash_tc_causal": 0.508}[causal_id]


@pytest.mark.parametrize("share, passes", [(0.508, True), (0.6, True), (0.61, False), (1.0, False)])
def test_causal_counter_rule_at_its_edge(monkeypatch, share, passes):
    """`counters.measure` on the causal step: the student's count against the unmasked step's reference, both at
    the perf shape (ncu stubbed: this machine has no GPU)."""
    reference_count = 1_000_000
    calls = []

    def count(request, function, metric, env, timeout_s):
        calls.append((request["kernel_id"], function, metric, tuple(request["shape"])))
        return round(share * reference_count) if function == "flash_tc_causal" else reference_count

    monkeypatch.setattr(counters, "count", count)
    kernel = SPEC.kernel("flash_tc_causal")
    request = {"spec_path": str(SPEC.path), "kernel_id": kernel.id, "source": "...", "seed": 1}
    measured = counters.measure(SPEC, kernel, request, {})
    shape = tuple(kernel.perf_shape)
    assert calls == [("flash_tc_causal", "flash_tc_causal", "tensor_instructions", shape),
                     ("flash_tc", "flash_tc", "tensor_instructions", shape)]
    assert (measured["failure"] == "") is passes
    if not passes:
        assert "tensor-core instructions (HMMA)" in measured["failure"] and "step flash_tc;" in measured["failure"]
        assert "at most 0.6 x that (600,000)" in measured["failure"]


# ---- S must not be materialised in global memory (the forward kinds' SASS requirement) ------------------

FORWARD = [kid for kid, k in SPEC.kernels.items() if k.kind.startswith("attention_forward")]


def scratch_failure(source: str, function: str = "f", defines: dict | None = None) -> list[str]:
    done = compile_cuda(source, kernels=(function,), defines=defines or {})
    return sass.check(done.cubin, function, ("no_global_scratch",), disassemble_always=False)[0]


def test_every_forward_kind_forbids_global_scratch_and_decode_does_not():
    for kid in FORWARD:
        assert "no_global_scratch" in problem(SPEC.kernel(kid).kind).sass_requirements, kid
    assert problem("attention_decode").sass_requirements == ()


@needs_sass_tools
@pytest.mark.parametrize("kernel_id", FORWARD)
def test_forward_references_meet_their_kinds_sass_requirements(kernel_id):
    kernel = SPEC.kernel(kernel_id)
    failures, facts = sass.check(compiled(kernel_id).cubin, kernel.function, problem(kernel.kind).sass_requirements,
                                 disassemble_always=False)
    assert failures == [] and facts["resources"]["GLOBAL"] == 0 and facts["resources"]["MALLOC"] == 0


@needs_sass_tools
def test_a_tensor_core_kernel_handed_in_for_a_cuda_core_step_fails_its_sass_requirement():
    """flash_forward and flash_causal are the CUDA-core steps: the flash_tc reference (HMMA) handed in for them
    is unmet, or it would pass the causal step's FP32-instruction rule without skipping a tile."""
    for kind in ("attention_forward", "attention_forward_causal"):
        assert problem(kind).sass_requirements == ("no_global_scratch", "no_tensor_cores")
        failures, _ = sass.check(compiled("flash_tc").cubin, "flash_tc", problem(kind).sass_requirements,
                                 disassemble_always=False)
        assert len(failures) == 1 and "HMMA" in failures[0], failures


@needs_sass_tools
def test_materialised_scores_are_found_in_the_cubin():
    path = TRACK.solutions / "wrong" / "materialised_scores.cu"
    kernel = SPEC.kernel(tracks.graded_kernel(path))
    failures = scratch_failure(path.read_text(), kernel.function, kernel.geometry.defines())
    assert len(failures) == 1 and failures[0].startswith(
        "it keeps intermediate results in global memory (2,147,483,648 bytes of __device__ variables): this step "
        "forbids materialising them, such as attention's scores S = Q K^T, in global memory.")
    assert tracks.expected_statuses(path) == ("unmet",)


@needs_sass_tools
@pytest.mark.parametrize("declaration, body, found", [
    ("__device__ float s[1 << 18];", "s[n] = o[n]; o[0] = s[n + 1];", ""),                  # 1 MiB: allowed
    ("__device__ float s[(1 << 18) + 1];", "s[n] = o[n]; o[0] = s[n + 1];", "1,048,580 bytes of __device__"),
    ("__device__ float s[1 << 19] = {1.0f};", "o[0] = s[n];", "2,097,152 bytes of __device__"),   # initialised
    ("", "float* s = (float*)malloc(n * 4); s[0] = o[0]; o[1] = s[0]; free(s);", "device-side malloc"),
    ("", "float* s = new float[n]; s[0] = o[0]; o[1] = s[0]; delete[] s;", "device-side malloc"),
    ("", 'printf("%d", n);', ""),                                     # printf's format string is no scratch
])
def test_global_scratch_rule_at_its_edges(declaration, body, found):
    failures = scratch_failure(f'{declaration}\nextern "C" __global__ void f(float* o, int n) {{ {body} }}')
    assert (failures == []) if not found else (len(failures) == 1 and found in failures[0]), failures
