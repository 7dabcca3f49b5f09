"""The ``bf16gemm`` problem kind of the tensor-core worklog, and the precision menu's ``f16gemm``, ``tf32gemm`` and
``fp8gemm``.

Shape ``(M, N, K)``: ``C = A @ B`` with ``A`` (M x K) and ``B`` (K x N) bfloat16, both row-major, and ``C``
(M x N) fp32, row-major, accumulated in fp32. Kernels are
``(float* C, const bf16* A, const bf16* B, int M, int N, int K)``, where ``bf16`` is ``unsigned short``
(the raw bits of a bfloat16: the grader's NVRTC has no ``cuda_bf16.h``, and the tensor-core instructions
take packed 16-bit registers anyway). Timed against cuBLAS through ``torch.mm(A, B, out_dtype=float32)``:
the same bf16 inputs, fp32 accumulation and fp32 output. Work in FLOPs (2 M N K).

Tolerance (`products_mismatch`). The inputs are bf16 values; the reference is their product in float64.
A product of two bf16 values (8-bit significands) is exact in fp32 (24 bits), so the only error of a kernel
that accumulates in fp32 is its K - 1 additions: at most K u (|A| @ |B|)[i][j] with u = 2^-24 for
round-to-nearest, and 2 K u for the truncating additions tensor cores may use inside an MMA. Every element
must be within ``ELEMENT_FACTOR`` K u (|A| @ |B|)[i][j] (that bound with a factor 2 to spare): a guarantee,
loose for random inputs, which catches a wrong index or a skipped tile. The relative Frobenius error must be
under ``FROBENIUS_RTOL``: in the emulations of `tests/tracks/test_tensorcores.py` (64 x 64, K = 4096), an fp32
accumulator gives 6e-7 rounding to nearest and 1.6e-5 truncating after every product (5e-6 truncating per
16-deep MMA), while an fp16 running sum gives 1.7e-3, sixteen times the bound.

``f16gemm`` is the same with fp16 inputs (``f16`` = ``unsigned short``) and ``torch.mm`` of fp16 as its
baseline; fp16 products (11-bit significands) are exact in fp32 too, so the tolerance is the same.

``tf32gemm`` takes fp32 inputs, which the kernel rounds to TF32 (10 explicit significand bits, u_t = 2^-11)
and multiplies on the tensor cores; cuBLAS's TF32 GEMM is its baseline. Against the float64 product of the
fp32 inputs, each product is off by at most (2 u_t + u_t^2) |a| |b| before the fp32 accumulation's own error,
so every element must be within that times (|A| @ |B|)[i][j] plus the bound above, and the relative Frobenius
error under ``TF32_FROBENIUS_RTOL``: emulated in the tests, TF32 rounding gives 2.9e-4 at K = 32 to 4096, and
inputs rounded to bf16 instead 2.3e-3.

``fp8gemm`` takes e4m3 inputs (``fp8`` = ``unsigned char``; 4 significant bits, largest value 448), A row-major
and B column-major (``B[k][n]`` at ``B[n * K + k]``, the layout cuBLAS's fp8 GEMM requires), and is timed against
``torch._scaled_mm`` of the same e4m3 tensors with unit scales, fp32 out and fp32 accumulation
(``use_fast_accum=False``: cuBLAS's fast accumulation skips promoting the fp8 tensor cores' partial sums to a
higher precision). The reference is again the float64 product of the inputs themselves, so e4m3's own rounding
(u = 2^-4) is not an error here: a product of two e4m3 values has at most 8 significant bits, exact in fp32,
and on sm_90 the e4m3 -> fp16 conversion that ptxas puts before its fp16 HMMA (Hopper's mma.sync has no fp8
path) is exact as well. What is left is fp32 accumulation, so the tolerance is bf16gemm's, 4 K 2^-24
(|A| @ |B|) per element and ``FROBENIUS_RTOL``: the format changes the inputs, not the allowance. Emulated in
the tests (64 x 64, K = 4096): fp32 accumulation gives at most 6.4e-8 (most partial sums of 8-bit products are
exact), an fp16 running sum 2.3e-3 and a C rounded to fp16 2.1e-4.

Each kind names its format (``precision``) and measures a correct output's errors (`products_accuracy`), which
the child records with every check and the feedback's precision table shows. Each brings the probe of its
mma.sync (`mma_probe`: back-to-back instructions of its format from registers), which the grading child times
after the kernel: the kernel's share of that ceiling is reported beside its ratio to cuBLAS, which alone
scores. fp8's is the fp16 instruction: sm_90's mma.sync has no fp8 path, and an e4m3 operand converted to fp16
pairs (exactly) runs on it at most at the fp16 rate. The m16n8k32 .e4m3 instruction itself is slower there (ptxas
adds an FADD for each of its accumulators), so a kernel that converts its fragments itself, as the reference does,
passes it; on a GPU with an fp8 mma.sync (Ada's QMMA) this probe understates the ceiling.

No hardware ceiling (``roof = None``): the FP32 pipes' peak does not bound a tensor-core kernel (cuBLAS bf16
runs at more than ten times it), and the device reports no tensor-core peak that could be read soundly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graders.cuda_engine.problems import InstructionProbe, Problem, Shape, Tensor

UNIT_ROUNDOFF = 2.0 ** -24   # fp32
ELEMENT_FACTOR = 4.0         # the bound is ELEMENT_FACTOR * K * u * (|A| @ |B|): 2 for truncation, 2 to spare
FROBENIUS_RTOL = 1e-4        # fp32 accumulation: at most 1.6e-5 at K = 4096; fp16: 1.7e-3 (see above)
TF32_ROUNDOFF = 2.0 ** -11
TF32_FROBENIUS_RTOL = 1e-3   # TF32 inputs: 2.9e-4; bf16-rounded inputs: 2.3e-3 (see above)
INPUT_GUARD = 1 << 19        # NaN bf16 values fenced before and after A and B (1 MiB each side)
PROBE_CHAINS = 8             # independent accumulators a warp in the mma.sync probe (each hides the others' latency)
# Back-to-back mma.sync of one shape and format (MMA), from registers, no memory traffic in the loop; every shape
# here takes four A registers, two B registers and four fp32 accumulators. Each chain has B registers of its own
# and A changes every iteration (two of its registers), so that no product is the same as another, which ptxas
# would compute once.
PROBE_SOURCE = r"""
#define CHAINS PROBE_CHAINS
extern "C" __global__ void probe(float* out, int iterations)
{
    unsigned a[4], b[CHAINS][2];
    for (int i = 0; i < 4; ++i) a[i] = 0x3c383c38u ^ (threadIdx.x * 2654435761u >> (8 * i)) & 0x00010001u;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) { b[c][0] = a[1] ^ (c << 9); b[c][1] = a[3] ^ (c << 25); }
    float acc[CHAINS][4] = {};
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("MMA {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[c][0]), "r"(b[c][1]));
        a[0] = (a[0] + 0x00010001u) & 0x3f3f3f3fu;   // finite in every format: at most 0x3f a byte
        a[2] = (a[2] + 0x00010001u) & 0x3f3f3f3fu;
    }
    float sum = 0.0f;
    for (int c = 0; c < CHAINS; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
"""


@dataclass(frozen=True)
class ProductsExpected:
    """The float64 product of the inputs (bf16 or fp16 values) and each element's error allowance."""

    c: Tensor       # float64, M x N
    bound: Tensor   # float64, M x N
    frobenius_rtol: float = FROBENIUS_RTOL


def element_bound(k: int) -> float:
    """The allowed error of one element, as a multiple of (|A| @ |B|)[i][j], for inner dimension ``k``."""
    return ELEMENT_FACTOR * k * UNIT_ROUNDOFF


def _fenced(rows: int, cols: int, gen: Any, dtype: str) -> Tensor:
    """A random rows x cols matrix of torch dtype ``dtype`` inside a NaN-filled buffer: a read past either end
    gives NaN."""
    import torch
    buffer = torch.full((rows * cols + 2 * INPUT_GUARD,), float("nan"), device=gen.device, dtype=getattr(torch, dtype))
    body = buffer[INPUT_GUARD:INPUT_GUARD + rows * cols]
    body.copy_(torch.randn(rows * cols, generator=gen, device=gen.device, dtype=torch.float32))
    return body.view(rows, cols)


def _inputs(dtype: str):
    def make(shape: Shape, gen: Any) -> list[Tensor]:
        m, n, k = shape
        return [_fenced(m, k, gen, dtype), _fenced(k, n, gen, dtype)]
    return make


def _fp8_inputs(shape: Shape, gen: Any) -> list[Tensor]:
    """Row-major A (M x K) and column-major B (K x N: the transpose of a row-major N x K), both e4m3."""
    m, n, k = shape
    return [_fenced(m, k, gen, "float8_e4m3fn"), _fenced(n, k, gen, "float8_e4m3fn").t()]


def _reference(inputs: list[Tensor]) -> ProductsExpected:
    a, b = (t.double() for t in inputs)
    return ProductsExpected(a @ b, element_bound(a.shape[1]) * (a.abs() @ b.abs()) + 1e-30)


def _tf32_reference(inputs: list[Tensor]) -> ProductsExpected:
    a, b = (t.double() for t in inputs)
    per_product = 2 * TF32_ROUNDOFF + TF32_ROUNDOFF ** 2
    return ProductsExpected(a @ b, (per_product + element_bound(a.shape[1])) * (a.abs() @ b.abs()) + 1e-30,
                            TF32_FROBENIUS_RTOL)


def products_mismatch(out: Tensor, expected: ProductsExpected) -> str:
    """'' if fp32 ``out`` is the product within the tolerances above, else what is wrong (NaN always is)."""
    import torch
    c = expected.c
    diff = out.double() - c
    nan = torch.isnan(out)
    bad = nan | ~(diff.abs() <= expected.bound)
    norm = float(torch.linalg.vector_norm(c))
    frob = float(torch.linalg.vector_norm(torch.where(nan, c, diff))) / norm if norm else 0.0
    count = int(bad.sum())
    if not count and frob <= expected.frobenius_rtol:
        return ""
    parts = []
    if int(nan.sum()):
        i, j = (int(v) for v in nan.nonzero()[0])
        parts.append(f"{int(nan.sum())} of {out.numel()} values are NaN (never written, or computed from a read "
                     f"outside A or B, which are fenced with NaN), the first C[{i}][{j}]")
    if count:
        i, j = (int(v) for v in bad.nonzero()[0])
        parts.append(f"{count} of {out.numel()} values outside the fp32-accumulation tolerance; first at "
                     f"C[{i}][{j}]: expected {float(c[i, j]):.6g}, got {float(out[i, j]):.6g}")
    parts.append(f"relative Frobenius error {frob:.3g} (allowed {expected.frobenius_rtol:g})")
    return "; ".join(parts)


def products_accuracy(out: Tensor, expected: ProductsExpected) -> dict[str, float]:
    """A correct ``out``'s errors against the float64 product, for the feedback's precision table: the largest
    error relative to the largest element of C (``max_rel_error``), the relative Frobenius error the check
    bounds, and the largest share of an element's allowance used (``element_bound_used``, at most 1)."""
    import torch
    err = (out.double() - expected.c).abs()
    largest, norm = float(expected.c.abs().max()), float(torch.linalg.vector_norm(expected.c))
    return {"max_rel_error": float(err.max()) / largest if largest else 0.0,
            "frobenius_rel_error": float(torch.linalg.vector_norm(err)) / norm if norm else 0.0,
            "element_bound_used": float((err / expected.bound).max())}


def _cublas(out: Tensor, inputs: list[Tensor]) -> None:
    """cuBLAS with the inputs' dtype, fp32 accumulation and fp32 output."""
    import torch
    if out.is_cuda:
        torch.mm(inputs[0], inputs[1], out_dtype=torch.float32, out=out)
    else:   # the CPU tests' stand-in: torch has no CPU kernel for out_dtype
        torch.mm(inputs[0].float(), inputs[1].float(), out=out)


def _cublas_tf32(out: Tensor, inputs: list[Tensor]) -> None:
    """cuBLAS's TF32 GEMM of fp32 inputs, fp32 out."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.matmul(inputs[0], inputs[1], out=out)


_UNIT_SCALES: dict[str, tuple[Tensor, Tensor]] = {}   # by device: _scaled_mm's scale_a and scale_b, both 1


def _cublas_fp8(out: Tensor, inputs: list[Tensor]) -> None:
    """cuBLAS's fp8 GEMM (torch._scaled_mm: e4m3 A row-major, B column-major, scales 1, fp32 accumulation and
    out). The scales are made once per device, so that no launch but the GEMM's is timed."""
    import torch
    a, b = inputs
    scales = _UNIT_SCALES.get(str(a.device))
    if scales is None:
        scales = _UNIT_SCALES[str(a.device)] = (torch.ones((), device=a.device), torch.ones((), device=a.device))
    torch._scaled_mm(a, b, scale_a=scales[0], scale_b=scales[1], out_dtype=torch.float32, use_fast_accum=False,
                     out=out)


def mma_probe(shape: str, types: str, note: str = "") -> InstructionProbe:
    """The mma.sync ceiling of one format: ``PROBE_SOURCE`` with mma.sync.aligned.<shape>.row.col.<types>, each
    warp doing PROBE_CHAINS of them (2 m n k FLOPs each) an iteration; ``note`` says why this instruction, where it
    is not the format's own."""
    m, n, k = (int(v) for v in shape[1:].replace("n", " ").replace("k", " ").split())
    instruction = f"mma.sync.aligned.{shape}.row.col.{types}"
    source = PROBE_SOURCE.replace("PROBE_CHAINS", str(PROBE_CHAINS)).replace("MMA", instruction)
    return InstructionProbe(f"{instruction} (registers only, back to back{note})", source,
                            PROBE_CHAINS * 2 * m * n * k)


def _gemm(kind: str, make_inputs, c_type: str, reference, baseline, baseline_name: str, precision: str,
          probe: InstructionProbe) -> Problem:
    return Problem(
        kind=kind,
        signature=f"(float* C, const {c_type}* A, const {c_type}* B, int M, int N, int K)",
        shape_names=("M", "N", "K"),
        make_inputs=make_inputs,
        out_shape=lambda s: (s[0], s[1]),
        reference=reference,
        baseline=baseline,
        baseline_name=baseline_name,
        work=lambda s: 2 * s[0] * s[1] * s[2],
        work_unit="FLOP",
        sizes=lambda s: (s[0], s[1], s[2]),
        grid=lambda s, tile: (-(-s[1] // tile[0]), -(-s[0] // tile[1]), 1),   # x over N (columns), y over M
        compare=products_mismatch,
        roof=None,
        sass_requirements=("tensor_cores",),
        precision=precision,
        accuracy=products_accuracy,
        instruction_probe=probe,
    )


PROBLEMS = [_gemm("bf16gemm", _inputs("bfloat16"), "bf16", _reference, _cublas,
                  "cuBLAS bf16 GEMM (torch.mm, fp32 out)", "bf16 in, fp32 accumulate",
                  mma_probe("m16n8k16", "f32.bf16.bf16.f32")),
            _gemm("f16gemm", _inputs("float16"), "f16", _reference, _cublas, "cuBLAS fp16 GEMM (torch.mm, fp32 out)",
                  "fp16 in, fp32 accumulate", mma_probe("m16n8k16", "f32.f16.f16.f32")),
            _gemm("tf32gemm", _inputs("float32"), "float", _tf32_reference, _cublas_tf32,
                  "cuBLAS TF32 GEMM (torch.matmul, TF32 on)", "TF32 (fp32 in, rounded), fp32 accumulate",
                  mma_probe("m16n8k8", "f32.tf32.tf32.f32")),
            _gemm("fp8gemm", _fp8_inputs, "fp8", _reference, _cublas_fp8,
                  "cuBLAS fp8 GEMM (torch._scaled_mm, e4m3, fp32 out)", "fp8 e4m3 in, fp32 accumulate",
                  mma_probe("m16n8k16", "f32.f16.f16.f32", "; sm_90 runs e4m3 as fp16 on it"))]
