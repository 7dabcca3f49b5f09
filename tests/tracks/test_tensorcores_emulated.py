"""The tensor-core worklog's mma.sync references run correctly on a CPU emulation of CUDA (tests/tracks/cuda_emu:
a block is BLOCK_X * BLOCK_Y std::threads, warps of 32 meet at barriers of their own for ldmatrix and mma.sync).

Each kernel is compiled with g++ at its spec geometry, its inline-PTX wrappers (the top-level functions whose
body holds ``asm``) replaced by element-by-element emulations of the same instructions: cuda_emu.h's ldmatrix,
cp.async and bf16 mma.sync, and ``EXTRA`` below for what this track adds (ldmatrix from a 32-bit shared
address, mma.sync m16n8k16 .f16, m16n8k8 .tf32 with cvt.rna.tf32, m16n8k32 .e4m3), each written from the PTX
ISA's fragment layouts. The kernel runs once per check on buffers written to files; everything else is the
grader's own (`graders.cuda_engine.child.Bench.check`: fenced inputs, the NaN-poisoned output between canary
guards, the kind's checker). Indexing, swizzles, the pipeline's stage rotation, fragment layouts and tile edges
are checked, not speed or the GPU's memory model. The WMMA steps (no wmma emulation) are not run here, nor the
known-wrong kernels whose mistake is a race (no_stage_barrier) or an instruction that only its own name would
tell the emulation (fp8_e5m2); fp8_f16_accumulate runs with the .f16-accumulator mma.sync emulated, and
unswizzled, whose fault is a hardware counter's, is correct.
"""
from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from emu_build import CXX, EMU, EmuBuilder

from graders import tracks
from graders.cuda_engine.child import Bench
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import Geometry, load_spec
from graders.result import Status

SPEC = load_spec("tensorcores")
WRONG = tracks.get("tensorcores").solutions / "wrong"
EMULATED = ["mma", "swizzle", "pipeline", "warptiling", "fp16", "tf32", "fp8"]
# per kernel: one block with a single K slab, and several blocks over more slabs than pipeline stages
SHAPES = {kid: [(SPEC.kernel(kid).geometry.tile[1], SPEC.kernel(kid).geometry.tile[0],
                 dict(SPEC.kernel(kid).geometry.params)["BK"]),
                (2 * SPEC.kernel(kid).geometry.tile[1], 3 * SPEC.kernel(kid).geometry.tile[0],
                 5 * dict(SPEC.kernel(kid).geometry.params)["BK"])] for kid in EMULATED}
WRONG_CASES = {"transposed_fragment": ((64, 128, 96), Status.INCORRECT),
               "fp8_f16_accumulate": ((256, 384, 320), Status.INCORRECT),
               "unswizzled": ((128, 192, 160), Status.OK)}   # correct: only its bank conflicts (ncu) are wrong

pytestmark = pytest.mark.skipif(CXX is None, reason="needs g++")

EXTRA = r"""
#include <cstdint>
// ldmatrix and cp.async from a 32-bit shared-memory address (what this track's smem() gives: shared arrays are static
// storage here, below 4 GiB in a non-PIE executable)
inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) { emu_ldmatrix_x4(r, (const void*)(uintptr_t)addr, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr)
{
    emu_ldmatrix_x4(r, (const void*)(uintptr_t)addr, true);
}
// cp.async to a 32-bit shared-memory address
inline void cp_async16(unsigned dst, const void* src) { cp_async16((void*)(uintptr_t)dst, src); }

inline float emu_f16_value(unsigned h)
{
    const unsigned sign = h >> 15 & 1, exponent = h >> 10 & 0x1f, mantissa = h & 0x3ff;
    float v = exponent == 0 ? std::ldexp((float)mantissa, -24)
            : exponent == 31 ? (mantissa ? NAN : INFINITY) : std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
    return sign ? -v : v;
}

inline float emu_e4m3_value(unsigned b)
{
    const unsigned sign = b >> 7 & 1, exponent = b >> 3 & 0xf, mantissa = b & 7;
    float v = exponent == 0 ? std::ldexp((float)mantissa, -9)
            : (exponent == 15 && mantissa == 7) ? NAN : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
    return sign ? -v : v;
}

// One warp's m16n8kK: every lane offers its fragments, then computes its four elements of d (row g, columns
// 2t and 2t + 1; row g + 8, the same) from A(row, k) and B(k, n) read out of the warp's fragments; `round`
// (none for an fp32 accumulator) is applied to the sum after every `chunk` products.
inline float emu_keep(float x) { return x; }
template <class AOf, class BOf, class Round = float (*)(float)>
inline void emu_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, unsigned depth, AOf A, BOf B,
                    unsigned chunk = 0, Round round = emu_keep)
{
    EmuWarp& warp = emu_warp();
    const unsigned lane = emu_linear % 32, g = lane / 4, t = lane % 4;
    unsigned* mine = warp.fragments[lane];
    for (int i = 0; i < 4; ++i) mine[i] = a[i];
    mine[4] = b0;
    mine[5] = b1;
    warp.barrier->arrive_and_wait();
    float result[4];
    for (int e = 0; e < 4; ++e) {
        const unsigned row = g + 8 * (e / 2), col = 2 * t + e % 2;
        float sum = d[e];
        for (unsigned k = 0; k < depth; ++k) {
            sum += A(warp, row, k) * B(warp, k, col);
            if (chunk && k % chunk == chunk - 1) sum = round(sum);
        }
        result[e] = sum;
    }
    warp.barrier->arrive_and_wait();
    for (int e = 0; e < 4; ++e) d[e] = result[e];
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: bf16's layout, fp16 halves
inline void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    auto half = [](unsigned word, unsigned k) { return emu_f16_value(k % 2 ? word >> 16 : word & 0xffffu); };
    emu_mma(d, a, b0, b1, 16,
            [&](EmuWarp& w, unsigned row, unsigned k) {
                return half(w.fragments[4 * (row % 8) + (k % 8) / 2][row / 8 + 2 * (k / 8)], k); },
            [&](EmuWarp& w, unsigned k, unsigned n) { return half(w.fragments[4 * n + (k % 8) / 2][4 + k / 8], k); });
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: A(row, k) in lane 4 (row % 8) + k % 4, register
// row / 8 + 2 (k / 4); B(k, n) in lane 4 n + k % 4, register k / 4
inline void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    emu_mma(d, a, b0, b1, 8,
            [](EmuWarp& w, unsigned row, unsigned k) {
                return __uint_as_float(w.fragments[4 * (row % 8) + k % 4][row / 8 + 2 * (k / 4)]); },
            [](EmuWarp& w, unsigned k, unsigned n) { return __uint_as_float(w.fragments[4 * n + k % 4][4 + k / 4]); });
}

// cvt.rna.tf32.f32: 10 explicit significand bits, to nearest, ties away from zero
inline unsigned tf32(float x) { return (__float_as_uint(x) + 0x1000u) & ~0x1fffu; }

// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32: A(row, k) in lane 4 (row % 8) + (k % 16) / 4,
// register row / 8 + 2 (k / 16), byte k % 4; B(k, n) in lane 4 n + (k % 16) / 4, register k / 16, byte k % 4
inline void mma_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    auto byte = [](unsigned word, unsigned k) { return emu_e4m3_value(word >> 8 * (k % 4) & 0xffu); };
    emu_mma(d, a, b0, b1, 32,
            [&](EmuWarp& w, unsigned row, unsigned k) {
                return byte(w.fragments[4 * (row % 8) + (k % 16) / 4][row / 8 + 2 * (k / 16)], k); },
            [&](EmuWarp& w, unsigned k, unsigned n) { return byte(w.fragments[4 * n + (k % 16) / 4][4 + k / 16], k); });
}

// mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16: the accumulator is two registers of fp16 pairs (c0, c1
// of row g; c2, c3 of row g + 8), the sum rounded to fp16 after every 16 products (sm_90's two HMMA.16816.F16)
inline float emu_to_f16(float x) { return (float)(_Float16)x; }
inline unsigned emu_f16_bits(float x)
{
    _Float16 h = (_Float16)x;
    unsigned short u;
    std::memcpy(&u, &h, 2);
    return u;
}
inline void mma_e4m3_f16(unsigned (&d)[2], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    auto byte = [](unsigned word, unsigned k) { return emu_e4m3_value(word >> 8 * (k % 4) & 0xffu); };
    float acc[4] = {emu_f16_value(d[0] & 0xffffu), emu_f16_value(d[0] >> 16), emu_f16_value(d[1] & 0xffffu),
                    emu_f16_value(d[1] >> 16)};
    emu_mma(acc, a, b0, b1, 32,
            [&](EmuWarp& w, unsigned row, unsigned k) {
                return byte(w.fragments[4 * (row % 8) + (k % 16) / 4][row / 8 + 2 * (k / 16)], k); },
            [&](EmuWarp& w, unsigned k, unsigned n) { return byte(w.fragments[4 * n + (k % 16) / 4][4 + k / 16], k); },
            16, emu_to_f16);
    d[0] = emu_f16_bits(acc[0]) | emu_f16_bits(acc[1]) << 16;
    d[1] = emu_f16_bits(acc[2]) | emu_f16_bits(acc[3]) << 16;
}
inline float2 f16x2_to_float2(unsigned h) { return make_float2(emu_f16_value(h & 0xffffu), emu_f16_value(h >> 16)); }
"""

DRIVER = r"""
// Runs one GEMM kernel once under the CPU emulation on buffers the test wrote to files (bytes, guards
// included) and writes C's buffer back. Usage: driver GRID_X GRID_Y BLOCK_X BLOCK_Y C C_OFFSET A A_OFFSET
// B B_OFFSET M N K (offsets in bytes).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

extern "C" void KERNEL(float* C, const void* A, const void* B, int M, int N, int K);

static std::vector<unsigned char> load(const char* path)
{
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    std::vector<unsigned char> buffer(file.tellg());
    file.seekg(0);
    file.read(reinterpret_cast<char*>(buffer.data()), buffer.size());
    return buffer;
}

int main(int argc, char** argv)
{
    if (argc != 14) { std::fprintf(stderr, "usage: see the test\n"); return 2; }
    auto arg = [&](int i) { return std::atol(argv[i]); };
    const dim3 grid{(unsigned)arg(1), (unsigned)arg(2), 1}, block{(unsigned)arg(3), (unsigned)arg(4), 1};
    std::vector<unsigned char> C = load(argv[5]), A = load(argv[7]), B = load(argv[9]);
    emu_launch(grid, block, [&] {
        KERNEL(reinterpret_cast<float*>(C.data() + arg(6)), A.data() + arg(8), B.data() + arg(10), arg(11), arg(12),
               arg(13));
    });
    std::ofstream(argv[5], std::ios::binary).write(reinterpret_cast<const char*>(C.data()), C.size());
    return 0;
}
"""

_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def without_inline_ptx(source: str) -> str:
    """``source`` without its top-level functions whose body holds ``asm``: the emulation defines them instead."""
    blank = _STRING_OR_COMMENT.sub(lambda m: " " * len(m.group()), source)   # braces in strings do not count
    keep, start, depth = [], 0, 0
    for i, ch in enumerate(blank):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if depth == 0 and ch in ";}":
            part = blank[start:i + 1]
            keep.append("" if ch == "}" and re.search(r"\basm\b", part) else source[start:i + 1])
            start = i + 1
    return "".join(keep) + source[start:]


def build(builder: EmuBuilder, source: Path, function: str, geometry: Geometry) -> Path:
    emulated = builder.folder / f"{source.stem}-{function}.cu"
    emulated.write_text(without_inline_ptx(source.read_text()))
    return builder.executable(emulated, function, geometry.defines(), builder.folder / "driver.cpp")


class EmulatedBench(Bench):
    """The grader's bench with the launch done by the compiled driver: every buffer goes to a file whole
    (guards included), the driver runs the kernel on it and writes the output's buffer back."""

    def __init__(self, exe: Path, kind: str, geometry: Geometry, tmp: Path):
        super().__init__(problem(kind), geometry, seed=0)
        self.exe, self.tmp = exe, tmp

    def launch(self, out, inputs: list, shape) -> None:
        args = [*self.problem.grid(shape, self.geometry.tile)[:2], *self.geometry.block]
        for i, tensor in enumerate((out, *inputs)):
            path = self.tmp / f"buffer{i}.bin"
            whole(tensor).view(self.torch.uint8).numpy().tofile(path)   # bytes: numpy has no bf16 or e4m3
            args += [path, tensor.storage_offset() * tensor.element_size()]
        subprocess.run([str(self.exe), *map(str, [*args, *self.problem.sizes(shape)])], check=True, timeout=600)
        whole(out).copy_(self.torch.from_file(str(self.tmp / "buffer0.bin"), size=whole(out).numel()))


def whole(tensor):
    """The whole buffer ``tensor`` is a view of, guards included, as a flat tensor."""
    import torch
    return torch.empty(0, dtype=tensor.dtype).set_(tensor.untyped_storage())


@pytest.fixture(scope="module")
def executables(tmp_path_factory) -> dict[str, tuple[Path, str, Geometry]]:
    """The emulated references and known-wrong kernels, built in parallel, with their kind and geometry."""
    tmp = tmp_path_factory.mktemp("tensorcores-emu")
    (tmp / "extra.h").write_text(EXTRA)
    (tmp / "driver.cpp").write_text(DRIVER)
    builder = EmuBuilder(tmp, ["-std=c++20", "-O1", "-fno-strict-aliasing", "-no-pie"],
                         [EMU / "cuda_emu.h", tmp / "extra.h"], timeout=600)
    jobs = {kid: (SPEC.kernel(kid).reference, SPEC.kernel(kid).function, SPEC.kernel(kid).kind,
                  SPEC.kernel(kid).geometry) for kid in EMULATED}
    for name in WRONG_CASES:
        kernel = SPEC.kernel(tracks.graded_kernel(WRONG / f"{name}.cu"))
        jobs[name] = (WRONG / f"{name}.cu", kernel.function, kernel.kind, kernel.geometry)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {key: pool.submit(build, builder, path, function, geometry)
                   for key, (path, function, _, geometry) in jobs.items()}
        return {key: (f.result(), jobs[key][2], jobs[key][3]) for key, f in futures.items()}


def test_the_emulated_steps_are_the_mma_sync_ones():
    assert sorted(EMULATED) == sorted(kid for kid, k in SPEC.kernels.items() if not kid.startswith("wmma"))


@pytest.mark.parametrize("kernel_id", EMULATED)
def test_reference_is_correct_under_emulation(kernel_id, executables, tmp_path):
    exe, kind, geometry = executables[kernel_id]
    for shape in SHAPES[kernel_id]:
        result = EmulatedBench(exe, kind, geometry, tmp_path).check(shape)
        assert result["ok"], (kernel_id, shape, result["message"])


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, executables, tmp_path):
    shape, status = WRONG_CASES[name]
    exe, kind, geometry = executables[name]
    result = EmulatedBench(exe, kind, geometry, tmp_path).check(shape)
    assert result["status"] == status, result["message"]
    expected = tracks.expected_statuses(WRONG / f"{name}.cu")
    assert str(status) in expected or (status == Status.OK and expected == ("unmet",))
