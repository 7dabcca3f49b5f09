"""Problem kinds of the attention track: ``row_softmax``, ``attention_forward``, ``attention_forward_causal``
and ``attention_decode``.

``row_softmax``: shape ``(rows, cols)``, fp32 logits in, fp32 probabilities out, each row's softmax. Kernels
are ``(float* out, const float* x, int rows, int cols)``, one block per row. Some rows hold large logits
(up to hundreds, far beyond the 88.7 where ``expf`` overflows in fp32) or logits all far below zero, so a
kernel that does not subtract the row's max gets inf or 0/0. Checked against a float64 softmax element by
element (`softmax_mismatch`); timed against a device-to-device copy of the same bytes (the roof of a kernel
that reads the logits once and writes the probabilities once), work in bytes (8 per element).

The attention kinds: ``Q``, ``K``, ``V`` are bf16 tensors (batch, heads, seq, head_dim), contiguous; the
output ``O = softmax(Q K^T / sqrt(head_dim)) V`` is **fp32** (batch, heads, seq_q, head_dim). NVRTC here has
no ``cuda_bf16.h``, so a kernel receives each bf16 as its 16 raw bits, an ``unsigned short``:
``__uint_as_float((unsigned)x << 16)`` is its exact float value. ``Q`` is multiplied by ``LARGE_LOGITS`` in
the last head, so that head's scores reach the hundreds: a kernel that does not subtract a running max
overflows there. Kernels take ``(float* out, const unsigned short* q, const unsigned short* k, const unsigned
short* v, int batch, int heads, int seq_q, int seq_k, int head_dim)``; head_dim is 64 or 128.

- ``attention_forward``: shape ``(batch, heads, seq_q, seq_k, head_dim)``, no mask; the grid is
  ceil(seq_q / TILE_Y) x (batch * heads) blocks.
- ``attention_forward_causal``: the same with the causal mask aligned to the **upper left**, as PyTorch's
  ``is_causal=True``: query i sees keys j <= i, whatever seq_q and seq_k are (FlashAttention aligns the
  bottom right instead when they differ). Work counts only the unmasked pairs.
- ``attention_forward_tc`` and ``attention_forward_causal_tc``: ``attention_forward`` and
  ``attention_forward_causal`` on the tensor cores: a kernel whose SASS has no tensor-core instruction (HMMA,
  ...) keeps its correctness points only (status ``unmet``).

The forward kinds forbid materialising S (SASS requirement ``no_global_scratch``, read from the cubin): a
kernel whose module holds more than 1 MiB of ``__device__`` variables, or calls device-side malloc, keeps its
correctness points only (status ``unmet``). The scores of a tile belong in registers or shared memory.
``attention_forward`` and ``attention_forward_causal`` run on the CUDA cores (``no_tensor_cores``): their SASS
holds no tensor-core instruction, or they too keep their correctness points only.
- ``attention_decode``: shape ``(batch, heads, seq_k, head_dim)``, one query token (seq_q = 1) against a KV
  cache of seq_k tokens; one block per (batch, head); its sizes are ``(batch, heads, seq_k, head_dim)``.

Correctness (`attention_mismatch`), the rule of FlashAttention's own tests: against an fp32 reference (TF32
off), in every (batch, head) the kernel's largest error is at most ``ERROR_FACTOR`` (2) x the largest error of
PyTorch computing the same attention in bf16 (`attention` on the bf16 tensors: ``S = Q K^T`` in bf16,
softmax rounded to bf16, ``P V`` in bf16), plus ``FP32_FLOOR``. Per head, not over the whole tensor: the
large-logit head's bf16 error is far larger than the others' and would hide their mistakes. NaN anywhere
fails (``Q``, ``K``, ``V`` sit between NaN guards, so reading past their ends makes NaN).

The forward kinds are timed against ``torch.nn.functional.scaled_dot_product_attention`` pinned to its flash
backend, work in FLOPs (4 x head_dim per unmasked query-key pair); decode against the same call with its one
query, work in bytes (the KV cache read once, plus Q and the output), with the DRAM roof.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from graders.cuda_engine.problems import Problem, Shape, Tensor, copy_bytes, matrix_bytes

# ---- row softmax ----------------------------------------------------------------------------------------

# fp32 softmax against float64: exp costs a few ulps (more with __expf: 2 + 1.2 |x| ulps), the row's sum
# about log2(cols) ulps in a tree and more in a serial loop, the online rescaling a few ulps per rescale,
# 1/sum one: well under 2e-5 of each probability (170 ulps). A probability below fp32's normal range may be
# flushed to zero, hence the absolute term. A kernel that skips the max, sums part of the row or rescales
# wrongly is off by orders of magnitude more, or makes inf or NaN.
SOFTMAX_RTOL = 2e-5
SOFTMAX_ATOL = 1e-37


def softmax_logits(shape: Shape, gen: Any) -> list[Tensor]:
    """Row r: N(0, 1) x a scale of 1, 10 or 100, shifted by a constant in [-300, 300]: rows whose largest
    logit is hundreds (exp overflows) or whose every logit is hundreds below zero (every exp underflows). The
    first row is always of the first sort and the second of the second (scale 1, shift in [200, 300] and in
    [-300, -200]), so that a kernel which skips the max makes NaN at every shape, not only at most."""
    import torch
    rows, cols = shape
    x = torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32)
    scale = 10.0 ** torch.randint(0, 3, (rows, 1), generator=gen, device=gen.device).float()
    shift = torch.rand((rows, 1), generator=gen, device=gen.device) * 600 - 300
    extreme = torch.rand(2, generator=gen, device=gen.device) * 100 + 200
    scale[:2] = 1.0
    shift[:2, 0] = (extreme * torch.tensor([1.0, -1.0], device=gen.device))[:rows]
    return [x * scale + shift]


def softmax_reference(inputs: list[Tensor]) -> Tensor:
    import torch
    return torch.softmax(inputs[0].double(), dim=-1)


def softmax_mismatch(out: Tensor, expected: Tensor) -> str:
    """'' if every fp32 probability is within SOFTMAX_RTOL of the float64 one (SOFTMAX_ATOL for ones below
    fp32's range), else how many are not, the first, and how many of them are NaN."""
    import torch
    bad = torch.isnan(out) | ~((out.double() - expected).abs() <= SOFTMAX_RTOL * expected + SOFTMAX_ATOL)
    count = int(bad.sum())
    if not count:
        return ""
    r, c = (int(i) for i in bad.nonzero()[0])
    nans = int(torch.isnan(out).sum())
    why = (f"; {nans} of them NaN (never written, or inf/inf and 0/0: was the row's max subtracted?)" if nans
           else "")
    return (f"{count} of {out.numel()} probabilities outside fp32 softmax's tolerance (relative {SOFTMAX_RTOL:g}); "
            f"first at out[{r}][{c}]: expected {float(expected[r, c]):.9g}, got {float(out[r, c]):.9g}{why}")


ROW_SOFTMAX = Problem(
    kind="row_softmax",
    signature="(float* out, const float* x, int rows, int cols)",
    shape_names=("rows", "cols"),
    make_inputs=softmax_logits,
    out_shape=lambda s: (s[0], s[1]),
    reference=softmax_reference,
    baseline=copy_bytes,
    baseline_name="device-to-device copy",
    work=matrix_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=lambda s, tile: (s[0], 1, 1),   # one block per row
    compare=softmax_mismatch,
    roof="dram",
)

# ---- attention ------------------------------------------------------------------------------------------

LARGE_LOGITS = 50.0    # Q's scale in the last head: scores of N(0, 50^2)
ERROR_FACTOR = 2.0     # the kernel's error may be at most this x PyTorch's in bf16 ...
FP32_FLOOR = 1e-5      # ... plus this: fp32 rounding, far below bf16's (outputs are O(1), bf16's step 2^-8)
INPUT_GUARD = 1 << 16  # bf16 NaNs fenced before and after Q, K and V


@dataclass(frozen=True)
class AttentionExpected:
    """The fp32 reference output, and per (batch, head) the largest error of PyTorch's bf16 attention."""

    o: Tensor           # fp32 (batch, heads, seq_q, head_dim)
    torch_error: Tensor  # fp32 (batch, heads)


def _fenced_randn(shape: Shape, gen: Any) -> Tensor:
    """A random bf16 tensor inside a NaN-filled buffer: a read past either end of it gives NaN."""
    import torch
    n = math.prod(shape)
    buffer = torch.full((n + 2 * INPUT_GUARD,), float("nan"), device=gen.device, dtype=torch.bfloat16)
    body = buffer[INPUT_GUARD:INPUT_GUARD + n].view(shape)
    body.copy_(torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32))
    return body


def qkv(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, gen: Any) -> list[Tensor]:
    """Q, K, V in bf16, N(0, 1) but Q x LARGE_LOGITS in the last head (rounded to bf16 after scaling)."""
    q = _fenced_randn((batch, heads, seq_q, head_dim), gen)
    q[:, -1] *= LARGE_LOGITS
    return [q, _fenced_randn((batch, heads, seq_k, head_dim), gen), _fenced_randn((batch, heads, seq_k, head_dim), gen)]


def causal_mask(seq_q: int, seq_k: int, device: Any) -> Tensor:
    """True where query i may see key j: j <= i, aligned to the upper left (PyTorch's ``is_causal``)."""
    import torch
    return torch.ones(seq_q, seq_k, dtype=torch.bool, device=device).tril()


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """softmax(Q K^T / sqrt(head_dim)) V in the inputs' dtype, step by step as written."""
    import torch
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


def attention_reference(inputs: list[Tensor], causal: bool) -> AttentionExpected:
    """The fp32 reference (TF32 off) and PyTorch's bf16 error per (batch, head), one batch entry at a time
    (the scores of one entry at 16 heads x 4096 x 4096 are 1 GiB in fp32)."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    q, k, v = inputs
    outs, errors = [], []
    for b in range(q.shape[0]):
        o = attention(q[b].float(), k[b].float(), v[b].float(), causal)
        pt = attention(q[b], k[b], v[b], causal).float()   # PyTorch in bf16: the error rule's yardstick
        outs.append(o)
        errors.append((pt - o).abs().amax(dim=(-2, -1)))
    return AttentionExpected(torch.stack(outs), torch.stack(errors))


def attention_mismatch(out: Tensor, expected: AttentionExpected) -> str:
    """'' if in every (batch, head) the largest error of ``out`` is at most ERROR_FACTOR x PyTorch's bf16 error
    there + FP32_FLOOR, and nothing is NaN; else where it is not."""
    import torch
    nan = torch.isnan(out)
    if bool(nan.any()):
        index = tuple(int(i) for i in nan.nonzero()[0])
        return (f"{int(nan.sum())} of {out.numel()} outputs are NaN, the first out{list(index)} (never written, "
                f"read outside Q, K or V, which are fenced with NaN, or inf/inf: was the max subtracted?)")
    error = (out - expected.o).abs().amax(dim=(-2, -1))
    allowed = ERROR_FACTOR * expected.torch_error + FP32_FLOOR
    bad = error > allowed
    if not bool(bad.any()):
        return ""
    b, h = (int(i) for i in bad.nonzero()[0])
    diff = (out[b, h] - expected.o[b, h]).abs()
    row, col = (int(i) for i in (diff == diff.max()).nonzero()[0])
    yardstick = float(expected.torch_error[b, h])
    return (f"{int(bad.sum())} of {bad.numel()} (batch, head) pairs too far from the fp32 reference; first "
            f"batch {b}, head {h}: largest error {float(error[b, h]):.4g} at out[{b}][{h}][{row}][{col}] (expected "
            f"{float(expected.o[b, h, row, col]):.6g}, got {float(out[b, h, row, col]):.6g}), allowed "
            f"{float(allowed[b, h]):.4g} ({ERROR_FACTOR:g} x PyTorch's bf16 error {yardstick:.4g} + {FP32_FLOOR:g})")


def sdpa_flash(out: Tensor, inputs: list[Tensor], causal: bool) -> None:
    """torch.nn.functional.scaled_dot_product_attention on the flash backend only (its bf16 result is not
    copied into ``out``: the copy is not attention's work)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        torch.nn.functional.scaled_dot_product_attention(*inputs, is_causal=causal)


def unmasked_pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    """The query-key pairs the mask keeps: all, or sum over i of min(i + 1, seq_k) (upper-left causal)."""
    if not causal:
        return seq_q * seq_k
    inside = min(seq_q, seq_k)   # rows 0 .. inside-1 see i + 1 keys, the rest all seq_k
    return inside * (inside + 1) // 2 + (seq_q - inside) * seq_k


def forward_flops(shape: Shape, causal: bool) -> int:
    batch, heads, seq_q, seq_k, head_dim = shape
    return 4 * batch * heads * head_dim * unmasked_pairs(seq_q, seq_k, causal)   # Q K^T and P V, 2 each


ATTENTION_FORWARD = Problem(
    kind="attention_forward",
    signature=("(float* out, const unsigned short* q, const unsigned short* k, const unsigned short* v, "
               "int batch, int heads, int seq_q, int seq_k, int head_dim)"),
    shape_names=("batch", "heads", "seq_q", "seq_k", "head_dim"),
    make_inputs=lambda s, gen: qkv(*s, gen),
    out_shape=lambda s: (s[0], s[1], s[2], s[4]),
    reference=lambda inputs: attention_reference(inputs, causal=False),
    baseline=lambda out, inputs: sdpa_flash(out, inputs, causal=False),
    baseline_name="torch SDPA, flash backend",
    work=lambda s: forward_flops(s, causal=False),
    work_unit="FLOP",
    sizes=lambda s: s,
    grid=lambda s, tile: (-(-s[2] // tile[1]), s[0] * s[1], 1),   # x over query tiles, y over (batch, head)
    compare=attention_mismatch,
    # S stays on chip (no __device__ buffer, no device malloc), and on the CUDA cores: the tensor cores are the
    # flash_tc steps' lesson, and a tensor-core kernel would pass the causal step's FP32-instruction rule
    sass_requirements=("no_global_scratch", "no_tensor_cores"),
)

ATTENTION_FORWARD_CAUSAL = replace(
    ATTENTION_FORWARD, kind="attention_forward_causal",
    reference=lambda inputs: attention_reference(inputs, causal=True),
    baseline=lambda out, inputs: sdpa_flash(out, inputs, causal=True),
    baseline_name="torch SDPA, flash backend, is_causal",
    work=lambda s: forward_flops(s, causal=True),
)

ON_TENSOR_CORES = ("tensor_cores", "no_global_scratch")
ATTENTION_FORWARD_TC = replace(ATTENTION_FORWARD, kind="attention_forward_tc", sass_requirements=ON_TENSOR_CORES)
ATTENTION_FORWARD_CAUSAL_TC = replace(ATTENTION_FORWARD_CAUSAL, kind="attention_forward_causal_tc",
                                      sass_requirements=ON_TENSOR_CORES)


def decode_bytes(shape: Shape) -> int:
    """K and V read once (bf16), Q read and the fp32 output written."""
    batch, heads, seq_k, head_dim = shape
    return batch * heads * head_dim * (2 * 2 * seq_k + 2 + 4)


ATTENTION_DECODE = Problem(
    kind="attention_decode",
    signature=("(float* out, const unsigned short* q, const unsigned short* k, const unsigned short* v, "
               "int batch, int heads, int seq_k, int head_dim)"),
    shape_names=("batch", "heads", "seq_k", "head_dim"),
    make_inputs=lambda s, gen: qkv(s[0], s[1], 1, s[2], s[3], gen),
    out_shape=lambda s: (s[0], s[1], 1, s[3]),
    reference=lambda inputs: attention_reference(inputs, causal=False),
    baseline=lambda out, inputs: sdpa_flash(out, inputs, causal=False),
    baseline_name="torch SDPA, flash backend, one query",
    work=decode_bytes,
    work_unit="B",
    sizes=lambda s: s,
    grid=lambda s, tile: (s[0] * s[1], 1, 1),   # one block per (batch, head)
    compare=attention_mismatch,
    roof="dram",
)

PROBLEMS = [ROW_SOFTMAX, ATTENTION_FORWARD, ATTENTION_FORWARD_CAUSAL, ATTENTION_FORWARD_TC, ATTENTION_FORWARD_CAUSAL_TC,
            ATTENTION_DECODE]
