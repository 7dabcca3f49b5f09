"""Problem kinds of the serving track (W4): ``rmsnorm_residual``, ``swiglu``, ``paged_decode``, ``w4a16_gemv`` and
``fp8_scaled_gemm``.

NVRTC here has no ``cuda_bf16.h`` or ``cuda_fp16.h``: a kernel receives each bf16 or fp16 as its 16 raw bits, an
``unsigned short``. The engine's output buffer is fp32 memory; the fused kinds write bf16 into it, two values a
4-byte word (``out_shape`` counts words), and are checked on its bf16 view. A word is an fp32 NaN before the launch
(its high half a bf16 NaN, its low half 0), so a word that still holds those bits was never written.

``rmsnorm_residual``: shape ``(rows, cols)``, cols a multiple of 8. ``x``, ``residual`` (rows x cols) and
``weight`` (cols) bf16; out holds two bf16 matrices, ``h = x + residual`` (the next layer's residual) then
``y = h / sqrt(mean(h^2) + EPS) * weight`` (vLLM's ``fused_add_rms_norm``). Kernels ``(unsigned short* out, const
unsigned short* x, const unsigned short* residual, const unsigned short* weight, int rows, int cols)``, one block
per ``TILE_Y`` rows. Each row is N(0, 1) times 0.1, 1 or 30 (sums of squares in bf16 or fp16 lose them).

``swiglu``: shape ``(tokens, d)``, d a multiple of 8. ``x`` (tokens x 2d, bf16) holds the gate in its first d
columns and the up projection in its last d (vLLM's ``silu_and_mul`` layout); out (tokens x d, bf16) is
``silu(gate) * up``. Kernels ``(unsigned short* out, const unsigned short* x, int tokens, int d)`` on ceil(d /
TILE_X) x tokens blocks. Rows are scaled by 1 or 100, so gates reach +-300: ``exp(g) / (1 + exp(g))`` is inf / inf
there, ``g / (1 + exp(-g))`` is right.

Both fused kinds: each value within ``FUSED_RTOL`` x |expected| + ``FUSED_ATOL`` of the float64 result from the
same bf16 inputs. A correct fp32 kernel is off by one bf16 rounding of its output (up to 2^-8 relative, bf16's unit
roundoff, for a value just above a power of two) plus, for ``y``, the bf16 rounding of ``h`` if it normalises the
rounded ``h`` (up to 2^-8 more); fp32 sums and ``__expf`` add about 1e-6. ``FUSED_RTOL`` = 2^-6 is that worst case
with a factor 2 to spare (at 2^-7, no spare, a correct kernel failed on one value in 2^28 on an H100). Timed against
the unfused PyTorch sequence (eager, as a model written in PyTorch runs it: the add, then Hugging Face's
``LlamaRMSNorm``, nine kernels, seven over the whole tensor, 42 bytes an element where the fused kernel moves 8;
``F.silu`` then a multiply, two kernels, 10 bytes an element against 6), work in bytes: each input read once, each
output written once (``fused_bytes``), DRAM roof.

``paged_decode``: shape ``(batch, q_heads, kv_heads, max_len, head_dim, page_size)``: one query token a sequence
against a KV cache in pages of ``page_size`` tokens (vLLM's and FlashInfer's NHD layout): ``k_cache`` and
``v_cache`` (num_pages x page_size x kv_heads x head_dim, bf16), ``block_table`` (batch x max_pages int32,
max_pages = ceil(max_len / page_size): sequence b's token t is in page ``block_table[b][t / page_size]``, slot
``t % page_size``), ``seq_lens`` (batch, int32), ``q`` (batch x q_heads x head_dim, bf16); out (batch x q_heads x 1
x head_dim, fp32) ``softmax(q K^T / sqrt(head_dim)) V`` over the sequence's tokens, query head h reading KV head h /
(q_heads / kv_heads) (grouped-query attention). Kernels ``(float* out, const unsigned short* q, const unsigned
short* k_cache, const unsigned short* v_cache, const int* block_table, const int* seq_lens, int batch, int q_heads,
int kv_heads, int head_dim, int page_size, int max_pages)`` on kv_heads x batch blocks. The lengths are a function
of the shape (`sequence_lengths`: mixed, the longest max_len, one of 1, one a multiple of page_size), so the
roofline's bytes are too; the pages are a random permutation of a larger pool each draw, so a block table read as
contiguous reads the wrong pages. Every slot no sequence owns is NaN, and the block table's unused entries point at
a page of NaN: reading a token past a sequence's length gives NaN. Correct: the attention track's rule
(`tracks/attention/problem.py`, ``attention_mismatch``): per (sequence, head) the largest error against the fp32
reference at most 2 x that of PyTorch computing the same attention in bf16, plus 1e-5; the last query head's q is
scaled by 50, so its scores reach the hundreds. Timed against the best paged decode this image has: the pages
gathered into a padded contiguous cache and ``scaled_dot_product_attention`` with a length mask (FlashInfer's paged
decode is not installed here); work in bytes: the cache's live tokens read once, q, the table's used entries and the
lengths read, out written (``paged_decode_bytes``), DRAM roof.

``w4a16_gemv``: shape ``(batch, N, K)``, K a multiple of ``GROUP`` (128): ``y = x @ W^T`` with ``x`` (batch x K,
fp16) and W (N x K) in int4 with a fp16 scale per ``GROUP`` consecutive values of a row: ``w`` (N x K/2 bytes, the
even k in the low nibble) holds codes q in 0..15, ``W[n][k] = (q - 8) * scales[n][k / GROUP]``, ``scales`` (N x
K/GROUP fp16); y (batch x N) fp32. Kernels ``(float* y, const unsigned char* w, const unsigned short* scales, const
unsigned short* x, int batch, int N, int K)`` on 1 x ceil(N / TILE_Y) blocks. Correct as the NVFP4 GEMV: each y
within ``GEMV_RTOL`` x its row's sum of |W[n][k] x[b][k]| of the float64 product: the decoded weights and x are
exact in fp32, so the error is fp32 accumulation's; swapped nibbles or a wrong scale are off by a large part of it.
Timed against the HBM roofline as a copy reaches it: one device-to-device copy of the weights' and scales' bytes
(x and y are under 0.1% of them at the spec's shapes); the fp16 GEMV moves four times the weight bytes.

``fp8_scaled_gemm``: shape ``(M, N, K)``, ``C = scale_a * scale_b * (A @ B)``: the tensor-core track's ``fp8gemm``
(``tracks/tensorcores/problem.py``: e4m3 A row-major, B column-major, ``fp8`` = ``unsigned char``, C fp32, fp32
accumulation) with the per-tensor scales an fp8 checkpoint carries, one fp32 value each in [0.05, 0.5). Kernels
``(float* C, const fp8* A, const fp8* B, const float* scale_a, const float* scale_b, int M, int N, int K)`` on
ceil(N / TILE_X) x ceil(M / TILE_Y) blocks. Correct: that kind's tolerance on the scaled product (each element within
|scale_a scale_b| (4 K 2^-24 + 4 2^-24) (|A| @ |B|): the scales' two fp32 multiplies add at most 2 units; the relative
Frobenius error under ``FP8_FROBENIUS_RTOL`` = 2e-4, not the tensor-core track's 1e-4: Hopper's fp8 tensor cores add
with about 13 bits of mantissa, and a kernel that adds their sums into fp32 every 128 products, as cuBLASLt does, is
off by 1.26e-4 at every K (cuBLASLt measured 1.26-1.28e-4 on an H100 at the check shapes, the emulation in
tests/tracks/test_serving.py 1.25-1.29e-4; every 64 products, 7.6e-5); all of K in the tensor core's accumulator
(fast accumulation) is off by 3.3e-4 at K = 512 to 8.3e-4 at 1920; a scale applied twice is off by a factor of 2 to
20. On the tensor cores (SASS), timed
against ``torch._scaled_mm`` with the same scales (cuBLASLt), work in FLOPs, no roof.

``QUESTIONS`` (prefill against decode for one linear layer, each student's own layer and GPU; graded as a quiz's
literals against ``key.py``) are built on first use (`__getattr__`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from graders import tracks
from graders.cuda_engine.problems import Problem, Shape, Tensor

_attention = tracks.get("attention").problem_module()
_products = tracks.get("tensorcores").problem_module()

EPS = 1e-6                   # RMSNorm's epsilon (Llama's)
FUSED_RTOL = 2.0 ** -6
FUSED_ATOL = 1e-5
FP8_FROBENIUS_RTOL = 2e-4   # fp8_scaled_gemm: twice the 1.26e-4 of promotion every 128 products (above)
INPUT_GUARD = 1 << 12        # NaN values fenced before and after every bf16 or fp16 input
LARGE_LOGITS = _attention.LARGE_LOGITS
GROUP = 128                  # int4 values per fp16 scale
GEMV_RTOL = 1e-4
ZERO_POINT = 8
POISON = 0x7FC00000          # the bits of the NaN the grading child fills outputs with (an fp32 NaN)


def _fenced(shape: Shape, gen: Any, dtype: str = "bfloat16") -> Tensor:
    """Standard normal values of torch dtype ``dtype`` inside a NaN-filled buffer: a read past either end gives NaN."""
    import torch
    n = math.prod(shape)
    buffer = torch.full((n + 2 * INPUT_GUARD,), float("nan"), device=gen.device, dtype=getattr(torch, dtype))
    body = buffer[INPUT_GUARD:INPUT_GUARD + n].view(shape)
    body.copy_(torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32))
    return body


def _row_scaled(shape: Shape, gen: Any, scales: tuple[float, ...]) -> Tensor:
    """A fenced bf16 matrix whose rows are N(0, 1) times one of ``scales`` each."""
    import torch
    x = _fenced(shape, gen)
    pick = torch.randint(0, len(scales), (shape[0], 1), generator=gen, device=gen.device)
    x.copy_(x.float() * torch.tensor(scales, device=gen.device)[pick])
    return x


def bf16_view(out: Tensor, shape: Shape) -> Tensor:
    """The bf16 values a kernel wrote into the fp32 buffer ``out``, as ``shape``."""
    import torch
    return out.view(torch.bfloat16).view(shape)


@dataclass(frozen=True)
class Fused:
    """The float64 result of a fused kind, as the bf16 shape the kernel writes."""

    exact: Tensor


def fused_mismatch(out: Tensor, expected: Fused) -> str:
    """'' if every bf16 value is within FUSED_RTOL x |expected| + FUSED_ATOL, else how many are not and the first;
    words that still hold the NaN the grader filled the output with are named first, as never written."""
    import torch
    unwritten = out.view(torch.int32) == POISON
    if bool(unwritten.any()):
        index = [int(i) for i in unwritten.nonzero()[0]]
        index[-1] *= 2
        return (f"{int(unwritten.sum())} of {out.numel()} output words (two bf16 values each) never written: they "
                f"still hold the NaN the output was filled with; the first holds out{index} and the value after it")
    got = bf16_view(out, expected.exact.shape)
    bad = torch.isnan(got) | ~((got.double() - expected.exact).abs() <= FUSED_RTOL * expected.exact.abs() + FUSED_ATOL)
    count = int(bad.sum())
    if not count:
        return ""
    index = [int(i) for i in bad.nonzero()[0]]
    value = float(got[tuple(index)])
    never = " (NaN: never written, read outside an input, or inf / inf)" if math.isnan(value) else ""
    return (f"{count} of {got.numel()} bf16 values outside the tolerance ({FUSED_RTOL:g} x |expected| + "
            f"{FUSED_ATOL:g}); first at out{index}: expected {float(expected.exact[tuple(index)]):.6g}, got "
            f"{value:.6g}{never}")


def fused_bytes(shape: Shape, streams: float) -> int:
    """``streams`` bf16 values of rows x cols moved once."""
    return int(streams * 2 * shape[0] * shape[1])


# ---- RMSNorm + residual add -------------------------------------------------------------------------------

def rmsnorm_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    """x and residual with rows of scale 0.1, 1 or 30; weight 1 + N(0, 0.1^2)."""
    import torch
    x = _row_scaled(shape, gen, (0.1, 1.0, 30.0))
    residual = _row_scaled(shape, gen, (0.1, 1.0, 30.0))
    weight = _fenced((shape[1],), gen)
    weight.copy_(1 + 0.1 * weight.float())
    return [x, residual, weight]


def rmsnorm_reference(inputs: list[Tensor]) -> Fused:
    import torch
    x, residual, weight = (t.double() for t in inputs)
    h = x + residual
    y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight
    return Fused(torch.stack([h, y]))


def rmsnorm_unfused(out: Tensor, inputs: list[Tensor]) -> None:
    """The eager PyTorch sequence: h = x + residual, then Hugging Face's LlamaRMSNorm (to fp32, square, mean, rsqrt,
    multiply, to bf16, times weight). Its results are not copied into ``out``: the copy is not the work."""
    import torch
    x, residual, weight = inputs
    h = x + residual
    hf = h.float()
    variance = hf.pow(2).mean(-1, keepdim=True)
    weight * (hf * torch.rsqrt(variance + EPS)).to(h.dtype)


RMSNORM_RESIDUAL = Problem(
    kind="rmsnorm_residual",
    signature=("(unsigned short* out, const unsigned short* x, const unsigned short* residual, "
               "const unsigned short* weight, int rows, int cols)"),
    shape_names=("rows", "cols"),
    make_inputs=rmsnorm_inputs,
    out_shape=lambda s: (2, s[0], s[1] // 2),
    reference=rmsnorm_reference,
    baseline=rmsnorm_unfused,
    baseline_name="unfused PyTorch (eager): x + residual, then LlamaRMSNorm",
    work=lambda s: fused_bytes(s, 4) + 2 * s[1],   # x, residual read; h, y written; weight read once
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=lambda s, tile: (1, -(-s[0] // tile[1]), 1),
    compare=fused_mismatch,
    roof="dram",
)

# ---- SwiGLU -------------------------------------------------------------------------------------------------

def swiglu_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    tokens, d = shape
    return [_row_scaled((tokens, 2 * d), gen, (1.0, 100.0))]


def swiglu_reference(inputs: list[Tensor]) -> Fused:
    import torch
    x = inputs[0].double()
    d = x.shape[1] // 2
    gate, up = x[:, :d], x[:, d:]
    return Fused(gate * torch.sigmoid(gate) * up)


def swiglu_unfused(out: Tensor, inputs: list[Tensor]) -> None:
    """The eager sequence: ``F.silu(gate) * up`` (two kernels, silu's result written and read back)."""
    import torch
    x = inputs[0]
    d = x.shape[1] // 2
    torch.nn.functional.silu(x[:, :d]) * x[:, d:]


SWIGLU = Problem(
    kind="swiglu",
    signature="(unsigned short* out, const unsigned short* x, int tokens, int d)",
    shape_names=("tokens", "d"),
    make_inputs=swiglu_inputs,
    out_shape=lambda s: (s[0], s[1] // 2),
    reference=swiglu_reference,
    baseline=swiglu_unfused,
    baseline_name="unfused PyTorch (eager): F.silu(gate) * up",
    work=lambda s: fused_bytes(s, 3),   # gate and up read, out written
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=lambda s, tile: (-(-s[1] // tile[0]), -(-s[0] // tile[1]), 1),
    compare=fused_mismatch,
    roof="dram",
)

# ---- paged decode attention -------------------------------------------------------------------------------

def sequence_lengths(shape: Shape) -> list[int]:
    """The batch's lengths, fixed by the shape: uniform in 1..max_len from a seed of the shape, then the longest
    max_len, one of a whole number of pages (the last page full), one of 1 and one a token past a page boundary."""
    import torch
    batch, _, _, max_len, _, page = shape
    gen = torch.Generator().manual_seed(sum(v * 1000003 ** i for i, v in enumerate(shape)) % (1 << 31))
    lengths = torch.randint(1, max_len + 1, (batch,), generator=gen).tolist()
    whole = max(page, max_len // page // 2 * page)
    for i, length in enumerate((max_len, min(whole, max_len), 1, min(whole + 1, max_len))[:batch]):
        lengths[i] = length
    return lengths


def pages_of(length: int, page: int) -> int:
    return -(-length // page)


def paged_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    """[q, k_cache, v_cache, block_table, seq_lens]: the used pages a random choice from a pool a quarter larger,
    and at least batch x max_pages + 1 pages (so that a table read as contiguous stays inside it); page 0 is never
    used (the block table's unused entries point at it); every slot no token owns is NaN."""
    import torch
    batch, q_heads, kv_heads, max_len, head_dim, page = shape
    lengths = sequence_lengths(shape)
    used = sum(pages_of(n, page) for n in lengths)
    pool = max(used + used // 4, batch * pages_of(max_len, page)) + 1
    device = gen.device
    q = _fenced((batch, q_heads, head_dim), gen)
    q[:, -1] *= LARGE_LOGITS
    caches = []
    order = 1 + torch.randperm(pool - 1, generator=gen, device=device)[:used]
    table = torch.zeros((batch, pages_of(max_len, page)), dtype=torch.int32, device=device)
    for _ in range(2):
        cache = torch.full((pool, page, kv_heads, head_dim), float("nan"), dtype=torch.bfloat16, device=device)
        caches.append(cache)
    start = 0
    for b, n in enumerate(lengths):
        count = pages_of(n, page)
        pages = order[start:start + count]
        start += count
        table[b, :count] = pages.to(torch.int32)
        for cache in caches:
            tokens = torch.randn((count * page, kv_heads, head_dim), generator=gen, device=device)
            tokens[n:] = float("nan")
            cache[pages] = tokens.view(count, page, kv_heads, head_dim).to(torch.bfloat16)
    seq_lens = torch.tensor(lengths, dtype=torch.int32, device=device)
    return [q, caches[0], caches[1], table, seq_lens]


def gather(cache: Tensor, table: Tensor, b: int, n: int) -> Tensor:
    """Sequence b's n tokens of one cache, as (kv_heads, n, head_dim)."""
    page = cache.shape[1]
    rows = cache[table[b, :pages_of(n, page)].long()].flatten(0, 1)[:n]
    return rows.transpose(0, 1)


def paged_reference(inputs: list[Tensor]) -> Any:
    """The fp32 reference (TF32 off) and PyTorch's bf16 error per (sequence, head), sequence by sequence."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    q, k_cache, v_cache, table, seq_lens = inputs
    group = q.shape[1] // k_cache.shape[2]
    outs, errors = [], []
    for b, n in enumerate(seq_lens.tolist()):
        k, v = (gather(c, table, b, n).repeat_interleave(group, dim=0) for c in (k_cache, v_cache))
        qb = q[b][:, None, :]
        o = _attention.attention(qb.float(), k.float(), v.float(), False)
        pt = _attention.attention(qb, k, v, False).float()
        outs.append(o)
        errors.append((pt - o).abs().amax(dim=(-2, -1)))
    return _attention.AttentionExpected(torch.stack(outs), torch.stack(errors))


def gather_sdpa(out: Tensor, inputs: list[Tensor]) -> None:
    """The pages gathered into a padded contiguous cache (batch x kv_heads x max_pages * page_size x head_dim), then
    ``scaled_dot_product_attention`` with a mask of each sequence's length and grouped query heads."""
    import torch
    q, k_cache, v_cache, table, seq_lens = inputs
    batch, slots = table.shape[0], table.shape[1] * k_cache.shape[1]
    k, v = (c[table.long()].view(batch, slots, *c.shape[2:]).transpose(1, 2) for c in (k_cache, v_cache))
    mask = torch.arange(slots, device=q.device)[None, :] < seq_lens[:, None]
    torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=mask[:, None, None, :],
                                                     enable_gqa=True)


def paged_decode_bytes(shape: Shape) -> int:
    """The live tokens' K and V read once (bf16), q read (bf16), out written (fp32), the block table's used entries
    and the lengths read."""
    batch, q_heads, kv_heads, _, head_dim, page = shape
    lengths = sequence_lengths(shape)
    return (sum(lengths) * kv_heads * head_dim * 2 * 2 + batch * q_heads * head_dim * (2 + 4)
            + 4 * sum(pages_of(n, page) for n in lengths) + 4 * batch)


PAGED_DECODE = Problem(
    kind="paged_decode",
    signature=("(float* out, const unsigned short* q, const unsigned short* k_cache, const unsigned short* v_cache, "
               "const int* block_table, const int* seq_lens, int batch, int q_heads, int kv_heads, int head_dim, "
               "int page_size, int max_pages)"),
    shape_names=("batch", "q_heads", "kv_heads", "max_len", "head_dim", "page_size"),
    make_inputs=paged_inputs,
    out_shape=lambda s: (s[0], s[1], 1, s[4]),
    reference=paged_reference,
    baseline=gather_sdpa,
    baseline_name="gather into a padded cache + torch SDPA with a length mask",
    work=paged_decode_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1], s[2], s[4], s[5], pages_of(s[3], s[5])),
    grid=lambda s, tile: (s[2], s[0], 1),   # one block per (KV head, sequence)
    compare=_attention.attention_mismatch,
    roof="dram",
    sass_requirements=("no_global_scratch",),
)

# ---- W4A16 GEMV ---------------------------------------------------------------------------------------------

def w4a16_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    """[w, scales, x]: w and scales in one byte buffer (the baseline copies it), random codes, scales in [0.005,
    0.02), x standard normal fp16 (fenced by NaN)."""
    import torch
    batch, n, k = shape
    wbytes, sbytes = n * k // 2, 2 * n * (k // GROUP)
    buffer = torch.empty(wbytes + sbytes, dtype=torch.uint8, device=gen.device)
    buffer[:wbytes] = torch.randint(0, 256, (wbytes,), generator=gen, device=gen.device, dtype=torch.uint8)
    scales = buffer[wbytes:].view(torch.float16).view(n, k // GROUP)
    scales.copy_(0.005 + 0.015 * torch.rand((n, k // GROUP), generator=gen, device=gen.device))
    return [buffer[:wbytes].view(n, k // 2), scales, _fenced((batch, k), gen, "float16")]


def unpack_int4(w: Tensor) -> Tensor:
    """N x K/2 bytes -> N x K codes, the even k from the low nibble."""
    import torch
    return torch.stack([w & 15, w >> 4], dim=-1).reshape(w.shape[0], -1)


def dequantise_int4(w: Tensor, scales: Tensor) -> Tensor:
    """W (N x K) in float64."""
    return (unpack_int4(w).double() - ZERO_POINT) * scales.double().repeat_interleave(GROUP, dim=1)


@dataclass(frozen=True)
class Product:
    """The float64 product and each element's magnitude (the sum of |W[n][k] x[b][k]|, the error's scale)."""

    exact: Tensor
    magnitude: Tensor


def w4a16_reference(inputs: list[Tensor]) -> Product:
    w, scales, x = inputs
    weights, xs = dequantise_int4(w, scales), x.double()
    return Product(xs @ weights.T, xs.abs() @ weights.abs().T)


def gemv_mismatch(out: Tensor, expected: Product) -> str:
    """'' if every y is within GEMV_RTOL of its magnitude from the float64 product, else how many are not."""
    import torch
    bad = torch.isnan(out) | ~((out.double() - expected.exact).abs() <= GEMV_RTOL * expected.magnitude)
    count = int(bad.sum())
    if not count:
        return ""
    b, n = (int(i) for i in bad.nonzero()[0])
    got = float(out[b, n])
    never = " (NaN: never written, or read outside x)" if math.isnan(got) else ""
    return (f"{count} of {out.numel()} values of y wrong; first y[{b}][{n}]: expected "
            f"{float(expected.exact[b, n]):.7g} (within {GEMV_RTOL:g} x {float(expected.magnitude[b, n]):.4g}), "
            f"got {got:.7g}{never}")


def copy_weights(out: Tensor, inputs: list[Tensor]) -> None:
    """The roof: the first half of the weights' and scales' buffer copied onto the second (their bytes read and
    written once), one device-to-device copy."""
    import torch
    whole = torch.tensor([], dtype=torch.uint8, device=inputs[0].device).set_(inputs[0].untyped_storage())
    half = whole.numel() // 2
    whole[half:2 * half].copy_(whole[:half])


def w4a16_bytes(shape: Shape) -> int:
    """w and scales read once, x read (fp16), y written (fp32)."""
    batch, n, k = shape
    return n * k // 2 + 2 * n * (k // GROUP) + 2 * batch * k + 4 * batch * n


W4A16_GEMV = Problem(
    kind="w4a16_gemv",
    signature=("(float* y, const unsigned char* w, const unsigned short* scales, const unsigned short* x, int batch, "
               "int N, int K)"),
    shape_names=("batch", "N", "K"),
    make_inputs=w4a16_inputs,
    out_shape=lambda s: (s[0], s[1]),
    reference=w4a16_reference,
    baseline=copy_weights,
    baseline_name="HBM roofline (a device-to-device copy of the weights' and scales' bytes)",
    work=w4a16_bytes,
    work_unit="B",
    sizes=lambda s: s,
    grid=lambda s, tile: (1, -(-s[1] // tile[1]), 1),
    compare=gemv_mismatch,
    roof="dram",
    sass_requirements=("no_global_scratch",),
)

# ---- FP8 GEMM with per-tensor scales ------------------------------------------------------------------------

def fp8_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    """[A, B, scale_a, scale_b]: the tensor-core track's e4m3 operands (A row-major, B column-major, fenced by NaN)
    and two fp32 scales in [0.05, 0.5), one value each."""
    import torch
    a, b = _products._fp8_inputs(shape, gen)
    return [a, b, *(0.05 + 0.45 * torch.rand(1, generator=gen, device=gen.device) for _ in range(2))]


def fp8_reference(inputs: list[Tensor]) -> Any:
    """scale_a scale_b (A @ B) in float64, each element's allowance the unscaled product's (fp32 accumulation) plus
    two fp32 roundings for the scales' multiplies, times |scale_a scale_b|."""
    a, b, scale_a, scale_b = inputs
    s = float(scale_a) * float(scale_b)
    ad, bd = a.double(), b.double()
    bound = abs(s) * (_products.element_bound(a.shape[1]) + 4 * _products.UNIT_ROUNDOFF) * (ad.abs() @ bd.abs())
    return _products.ProductsExpected(s * (ad @ bd), bound + 1e-30, FP8_FROBENIUS_RTOL)


def scaled_mm(out: Tensor, inputs: list[Tensor]) -> None:
    """cuBLASLt's fp8 GEMM with the per-tensor scales (torch._scaled_mm, fp32 out, fp32 accumulation)."""
    import torch
    a, b, scale_a, scale_b = inputs
    if out.is_cuda:
        torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.float32, use_fast_accum=False,
                         out=out)
    else:   # the CPU tests' stand-in: torch has no CPU _scaled_mm
        torch.mm(a.float(), b.float(), out=out).mul_(scale_a * scale_b)


FP8_SCALED_GEMM = Problem(
    kind="fp8_scaled_gemm",
    signature="(float* C, const fp8* A, const fp8* B, const float* scale_a, const float* scale_b, int M, int N, int K)",
    shape_names=("M", "N", "K"),
    make_inputs=fp8_inputs,
    out_shape=lambda s: (s[0], s[1]),
    reference=fp8_reference,
    baseline=scaled_mm,
    baseline_name="cuBLASLt fp8 GEMM (torch._scaled_mm, per-tensor scales, fp32 out)",
    work=lambda s: 2 * s[0] * s[1] * s[2],
    work_unit="FLOP",
    sizes=lambda s: (s[0], s[1], s[2]),
    grid=lambda s, tile: (-(-s[1] // tile[0]), -(-s[0] // tile[1]), 1),
    compare=_products.products_mismatch,
    sass_requirements=("tensor_cores",),
    precision="fp8 e4m3 in, per-tensor fp32 scales, fp32 accumulate",
    accuracy=_products.products_accuracy,
)

PROBLEMS = [RMSNORM_RESIDUAL, SWIGLU, PAGED_DECODE, W4A16_GEMV, FP8_SCALED_GEMM]


# ---- prefill vs decode: questions graded against key.py ------------------------------------------------------

# one linear layer y = x @ W^T, W N x K in bf16, x T x K: (K, N) of served models' projections
LAYERS = [(4096, 14336), (4096, 4096), (8192, 28672), (5120, 13824)]
# (bf16 dense tensor-core TFLOP/s, HBM TB/s) from datasheets: H100 SXM, H200, B200
GPUS = [(989.0, 3.35), (989.0, 4.8), (2250.0, 8.0)]


def _layer(r) -> dict:
    k, n = r.choice(LAYERS)
    return {"k": k, "n": n}


def _layer_gpu(r) -> dict:
    p, b = r.choice(GPUS)
    return _layer(r) | {"p": p, "b": b}


def _questions() -> list:
    from graders.quiz_engine.questions import Choice, Numeric
    layer = ("y = x @ W^T with W an N x K bf16 weight matrix and x T x K bf16 tokens, y T x N bf16; FLOPs 2 T N K; "
             "bytes: W, x read once and y written once")
    return [
        Numeric("decode_intensity", f"Decode: one token (T = 1) through {layer}. Its arithmetic intensity.",
                _layer, given="K = {k}, N = {n}", unit="FLOP/byte", rel_tol=0.02),
        Numeric("prefill_intensity", f"Prefill: a prompt of T = 4096 tokens through the same layer, {layer}. Its "
                "arithmetic intensity.", _layer, given="K = {k}, N = {n}", unit="FLOP/byte", rel_tol=0.02),
        Numeric("crossover_tokens", f"{layer}, on a GPU of peak P TFLOP/s (bf16, tensor cores) and bandwidth B "
                "TB/s. The number of tokens T at which the layer's arithmetic intensity reaches the GPU's ridge point "
                "(below it the layer is memory-bound, above it compute-bound); a real number, not rounded.",
                _layer_gpu, given="K = {k}, N = {n}, P = {p:g} TFLOP/s, B = {b:g} TB/s", unit="tokens", rel_tol=0.02),
        Numeric("decode_floor", f"{layer}. The least time of one decode token (T = 1) on that GPU: the larger of "
                "its bytes at B and its FLOPs at P.", _layer_gpu,
                given="K = {k}, N = {n}, P = {p:g} TFLOP/s, B = {b:g} TB/s", unit="µs", rel_tol=0.03),
        Numeric("prefill_floor", f"{layer}. The least time of a 4096-token prefill (T = 4096) on that GPU: the larger "
                "of its bytes at B and its FLOPs at P.", _layer_gpu,
                given="K = {k}, N = {n}, P = {p:g} TFLOP/s, B = {b:g} TB/s", unit="µs", rel_tol=0.03),
        Choice("batching", "A server decodes 16 sequences at once instead of one, through the same layer. On an H200, "
               "what happens to the layer's time per decode step?", {
                   "a": "about 16 times longer: 16 times the FLOPs",
                   "b": "about the same: the weights are read once for all 16 tokens, and 16 tokens are still far "
                        "below the ridge point, so the bytes of W still bound it",
                   "c": "about 4 times longer: the square root of the batch",
                   "d": "shorter: a batch of 16 fills the tensor cores"}),
        Choice("decode_lever", "For decode at batch 1, which change makes this layer faster on the same GPU?", {
            "a": "a faster tensor-core instruction (fp8 wgmma instead of bf16)",
            "b": "more threads per block",
            "c": "fewer bytes per weight: int4 weights (W4A16) read a quarter of bf16's bytes",
            "d": "a larger tile of W per block, for more reuse of each weight"}),
    ]


def __getattr__(name: str):
    """``QUESTIONS``, built on first use, so that the grading children, which import this module for its kinds,
    never import the quiz engine."""
    if name == "QUESTIONS":
        globals()["QUESTIONS"] = found = _questions()
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
