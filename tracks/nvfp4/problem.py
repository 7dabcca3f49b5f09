"""The NVFP4 GEMV journey (W5): its problem kind ``nvfp4_gemv`` and the reading questions on what Blackwell adds.

Shape ``(M, K)``, K a multiple of 64: ``y = W @ x`` with W an M x K matrix in NVFP4 and x, y in fp32.

- ``w`` (``unsigned char``, M x K/2, row-major): the e2m1 codes, two to a byte, the even k in the low nibble (the
  order NVIDIA's and torch's packing use). An e2m1 code is 1 sign, 2 exponent (bias 1) and 1 mantissa bit: the
  magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (`E2M1`), codes 8-15 their negatives (8 is -0).
- ``scales`` (``unsigned char``, M x K/16, row-major): one e4m3 block scale per 16 consecutive values of a row, as
  its bits (1 sign, 4 exponent with bias 7, 3 mantissa bits; 0x7F and 0xFF are NaN). The grader draws positive
  normal scales, 2^-6 to 448 (bytes 0x08 to 0x7E), so that neighbouring blocks differ.
- ``tensor_scale`` (``float``, one value): the per-tensor fp32 scale.
- ``x`` (``float``, K values), ``y`` (``float``, M values).

``W[m][k] = tensor_scale * e2m1(code of k) * e4m3(scales[m][k / 16])``. Kernels are
``(float* y, const unsigned char* w, const unsigned char* scales, const float* tensor_scale, const float* x,
int M, int K)``, launched on ``TILE_X / 256`` x ceil(M / TILE_Y) blocks: ``TILE_Y`` rows a block, and ``TILE_X /
256`` blocks sharing each row's K (1 but in the last two steps, whose 4 blocks form a cluster).

Correct: each ``y[m]`` within ``RTOL`` x the row's magnitude (the sum of ``|W[m][k] * x[k]|``) of the float64 product
of the dequantised W: the decoded values are exact (an e2m1 value times an e4m3 scale has at most 6 significant bits),
so the only error is fp32 arithmetic: a strictly sequential fp32 sum, the order that rounds worst, came within 5e-7 of
it at every check shape (on the CPU, the grader's inputs); a decode that drops a sign or reads the wrong scale is off by
a large fraction of it.

Timed against the HBM roofline as a copy reaches it: one device-to-device copy moving the bytes of ``w`` and
``scales`` (the first half of their buffer onto the second: half read, half written, ``work``'s bytes but for x and
y, 0.2% of them at the spec's shape). A GEMV reads every weight once and does 2 FLOPs per 4.5 bits, so memory is its
limit; a measured copy on the same GPU in the same child is the roof it can reach, where the datasheet's bandwidth is
one no kernel does (the engine checks that too: ``roof = "dram"``, a median faster than the bytes at the memory's
peak earns no speed points).

``QUESTIONS`` (the Blackwell part, graded as a quiz's literals against ``key.py``) are built on first use
(`__getattr__`), so that the grading children, which import this module for its kind, never import the quiz engine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from graders.cuda_engine.problems import Problem, Shape, Tensor

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
BLOCK = 16                 # values per e4m3 block scale
SPLIT_UNIT = 256           # TILE_X / SPLIT_UNIT blocks share each row's K
RTOL = 1e-4
SCALE_BYTES = (0x08, 0x7E)   # the e4m3 block scales drawn: positive normal values, 2^-6 to 448
CHUNK_VALUES = 1 << 24       # weights the reference dequantises at a time


def e4m3(bits: Tensor) -> Tensor:
    """e4m3 bytes (uint8) as float64, by their fields (NaN for 0x7F and 0xFF)."""
    import torch
    b = bits.to(torch.int64)
    sign = torch.where(b >= 128, -1.0, 1.0).double()
    exponent, mantissa = (b >> 3) & 15, (b & 7).double()
    value = torch.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * torch.pow(2.0, exponent - 7.0))
    value = torch.where((b & 0x7F) == 0x7F, math.nan, value)
    return sign * value


def e2m1(codes: Tensor) -> Tensor:
    """e2m1 codes (0-15) as float64, from the table."""
    import torch
    return torch.tensor(E2M1, dtype=torch.float64, device=codes.device)[codes.to(torch.int64)]


def unpack(w: Tensor) -> Tensor:
    """M x K/2 packed bytes -> M x K codes, the even k from the low nibble."""
    import torch
    return torch.stack([w & 15, w >> 4], dim=-1).reshape(w.shape[0], -1)


def dequantise(w: Tensor, scales: Tensor, tensor_scale: Tensor) -> Tensor:
    """The M x K matrix W in float64."""
    blocks = e4m3(scales).repeat_interleave(BLOCK, dim=1)
    return e2m1(unpack(w)) * blocks * tensor_scale.double()


def make_inputs(shape: Shape, gen) -> list[Tensor]:
    """[w, scales, tensor_scale, x]: w and scales views into one byte buffer (the baseline copies it), random codes,
    random scales in `SCALE_BYTES`, a tensor scale in [1e-3, 1e-2), x standard normal."""
    import torch
    m, k = shape
    wbytes, sbytes = m * k // 2, m * k // BLOCK
    buffer = torch.empty(wbytes + sbytes, dtype=torch.uint8, device=gen.device)
    buffer[:wbytes] = torch.randint(0, 256, (wbytes,), generator=gen, device=gen.device, dtype=torch.uint8)
    buffer[wbytes:] = torch.randint(SCALE_BYTES[0], SCALE_BYTES[1] + 1, (sbytes,), generator=gen, device=gen.device,
                                    dtype=torch.uint8)
    tensor_scale = 1e-3 + 9e-3 * torch.rand(1, generator=gen, device=gen.device)
    x = torch.randn(k, generator=gen, device=gen.device)
    return [buffer[:wbytes].view(m, k // 2), buffer[wbytes:].view(m, k // BLOCK), tensor_scale, x]


@dataclass(frozen=True)
class Product:
    """The reference: the float64 product and each row's magnitude (the sum of |W[m][k] x[k]|, the error's scale)."""

    exact: Tensor
    magnitude: Tensor


def reference(inputs: list[Tensor]) -> Product:
    """Row by row in chunks of at most `CHUNK_VALUES` weights, so that the float64 matrix is never whole (1 GiB at
    the spec's shape)."""
    import torch
    w, scales, tensor_scale, x = inputs
    rows, xd = max(1, CHUNK_VALUES // (2 * w.shape[1])), x.double()
    exact, magnitude = [], []
    for r in range(0, w.shape[0], rows):
        terms = dequantise(w[r:r + rows], scales[r:r + rows], tensor_scale) * xd
        exact.append(terms.sum(dim=1))
        magnitude.append(terms.abs().sum(dim=1))
    return Product(torch.cat(exact), torch.cat(magnitude))


def mismatch(out: Tensor, expected: Product) -> str:
    """'' if every y[m] is within RTOL of its row's magnitude from the float64 product, else how many are not."""
    import torch
    bad = torch.isnan(out) | ~((out.double() - expected.exact).abs() <= RTOL * expected.magnitude)
    count = int(bad.sum())
    if not count:
        return ""
    m = int(bad.nonzero()[0][0])
    got = float(out[m])
    never = " (NaN: never written, or made from one)" if math.isnan(got) else ""
    return (f"{count} of {out.numel()} values of y wrong; first y[{m}]: expected {float(expected.exact[m]):.7g} "
            f"(within {RTOL:g} x {float(expected.magnitude[m]):.4g}), got {got:.7g}{never}")


def copy_weights(out: Tensor, inputs: list[Tensor]) -> None:
    """The roof: the first half of the weights' and scales' buffer copied onto the second, one device-to-device copy
    (its bytes read and written: those of w and scales)."""
    import torch
    whole = torch.tensor([], dtype=torch.uint8, device=inputs[0].device).set_(inputs[0].untyped_storage())
    half = whole.numel() // 2
    whole[half:2 * half].copy_(whole[:half])


def gemv_bytes(shape: Shape) -> int:
    """Bytes a GEMV moves at the least: w and scales, the tensor scale and x read once, y written once."""
    m, k = shape
    return m * k // 2 + m * k // BLOCK + 4 + 4 * k + 4 * m


def grid(shape: Shape, tile: tuple[int, int]) -> tuple[int, int, int]:
    return (tile[0] // SPLIT_UNIT, -(-shape[0] // tile[1]), 1)


NVFP4_GEMV = Problem(
    kind="nvfp4_gemv",
    signature="(float* y, const unsigned char* w, const unsigned char* scales, const float* tensor_scale, "
              "const float* x, int M, int K)",
    shape_names=("M", "K"),
    make_inputs=make_inputs,
    out_shape=lambda s: (s[0],),
    reference=reference,
    baseline=copy_weights,
    baseline_name="HBM roofline (a device-to-device copy of the weights' and scales' bytes)",
    work=gemv_bytes,
    work_unit="B",
    sizes=lambda s: (s[0], s[1]),
    grid=grid,
    compare=mismatch,
    roof="dram",
    sass_requirements=("no_global_scratch",),
)

PROBLEMS = [NVFP4_GEMV]


# ---- the Blackwell part: reading questions, graded against key.py --------------------------------------------

BLACKWELL = {
    "tcgen05_issue": ("Hopper's `wgmma` is issued by a warpgroup (128 threads) that then holds the accumulators in "
                      "its registers. Who issues Blackwell's `tcgen05.mma`, and where does its accumulator live?", {
                          "a": "a warpgroup issues it; the accumulator lives in the warpgroup's registers, as wgmma's",
                          "b": "every warp issues its own; the accumulator lives in shared memory",
                          "c": "a single thread issues it for the CTA; the accumulator lives in Tensor Memory (TMEM)",
                          "d": "the TMA unit issues it; the accumulator lives in L2"}),
    "tmem_size": ("How big is Tensor Memory per SM on a B200, and how is it laid out?", {
        "a": "228 KB, shared with L1, like shared memory",
        "b": "256 KB: 128 lanes x 512 columns of 32-bit cells",
        "c": "64 KB: one register file's worth, 65,536 32-bit registers",
        "d": "50 MB, the L2's size, partitioned per SM"}),
    "tmem_columns": ("A CTA keeps a 128 x 256 fp32 accumulator in Tensor Memory, one row of it a lane. How many "
                     "columns must its `tcgen05.alloc` ask for?", {
                         "a": "128", "b": "256", "c": "512", "d": "1024"}),
    "tmem_alloc": ("Before a kernel can use Tensor Memory, what must it do?", {
        "a": "nothing: every thread owns its lane of TMEM from launch",
        "b": "declare it `__tmem__` like a `__shared__` array",
        "c": "ask the host to map it with cudaMalloc",
        "d": "allocate columns with `tcgen05.alloc` (a power of two, at least 32) from one warp, and free them with "
             "`tcgen05.dealloc` before it exits"}),
    "tmem_epilogue": ("How do the accumulators leave Tensor Memory in the epilogue?", {
        "a": "`tcgen05.ld`: each warp of a warpgroup reads the 32 TMEM lanes its warp index gives it into registers",
        "b": "ordinary `ld.shared` from the TMEM address",
        "c": "TMA copies TMEM to global memory directly",
        "d": "they never leave: `tcgen05.mma` writes C to global memory"}),
    "cta_pair": ("What does a CTA pair (`cta_group::2`) let one `tcgen05.mma` do?", {
        "a": "run two independent MMAs on one SM at twice the rate",
        "b": "share one Tensor Memory between two kernels",
        "c": "run one MMA across the two SMs of a cluster pair, each holding half of A and of the accumulator and "
             "loading half of B: an M = 256 tile in one instruction, each CTA loading half of the operands",
        "d": "let two warps of one CTA issue the same MMA"}),
    "block_scaled": ("On Blackwell, where does the NVFP4 block-scaled MMA (`tcgen05.mma ... .kind::mxf4nvf4 "
                     ".block_scale`) read the e4m3 scale factors of A and B from?", {
                         "a": "from registers, one per thread",
                         "b": "from Tensor Memory, where `tcgen05.cp` copied them from shared memory",
                         "c": "nowhere: the kernel must multiply the scales in after the MMA, as this track does",
                         "d": "from constant memory"}),
    "gemv_tensor_cores": ("The GEMV of this track (one activation vector) on a B200: would the FP4 tensor cores make "
                          "it much faster than a CUDA-core kernel that reaches 90% of HBM bandwidth?", {
                              "a": "yes: FP4 tensor cores are 4x faster than FP8, so it would be 4x faster",
                              "b": "yes: TMEM gives it more memory bandwidth than HBM",
                              "c": "no: tcgen05 cannot multiply a matrix by a vector at all",
                              "d": "no: it does 2 FLOPs per 4.5 bits of weights read, so it is memory-bound; the "
                                   "tensor cores raise a compute roof it is not under"}),
    "h200_runs": ("Which of these can the H200 (sm_90) that grades this track run?", {
        "a": "none of tcgen05, Tensor Memory and CTA pairs: they are sm_100 (Blackwell) instructions; the H200 has "
             "wgmma, TMA and thread-block clusters",
        "b": "all of them, more slowly",
        "c": "Tensor Memory but not tcgen05.mma",
        "d": "tcgen05.mma but only for fp8"}),
}


def _questions() -> list:
    from graders.quiz_engine.questions import Choice
    return [Choice(qid, text, options) for qid, (text, options) in BLACKWELL.items()]


def __getattr__(name: str):
    """``QUESTIONS``, built on first use (the module's docstring says why)."""
    if name == "QUESTIONS":
        globals()["QUESTIONS"] = found = _questions()
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
