// Element-by-element emulations of the inline-PTX helpers the tracks' tensor-core kernels define (each a function
// whose body is one `asm` statement), by the names and signatures of those helpers. The CPU preview
// (graders/cuda_engine/preview.py, EMULATED_PTX) drops a kernel's own helper when its PTX is the instruction named
// there and brings this one in with a using-declaration. Each follows the PTX ISA: ldmatrix's and mma.sync's
// fragment layouts (lane l = 4 g + t), cp.async as a copy done at once (commit and wait are no-ops; the barriers
// around the buffers are still real), cvt's roundings. WMMA's fragments are opaque to the kernel, so here a lane
// holds elements 8 l .. 8 l + 7 of the row-major 16 x 16 tile.
#pragma once
#include "cuda.h"

namespace emu_ptx {

inline float bf16_value(unsigned bits16) { return __uint_as_float(bits16 << 16); }
inline unsigned bf16_bits(float f)
{
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;   // NaN
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
inline float f16_value(unsigned h)
{
    const unsigned sign = h >> 15 & 1, exponent = h >> 10 & 0x1f, mantissa = h & 0x3ff;
    const float v = exponent == 0 ? std::ldexp((float)mantissa, -24)
                  : exponent == 31 ? (mantissa ? NAN : INFINITY) : std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
    return sign ? -v : v;
}
inline unsigned f16_bits(double x)   // rounded once to fp16 (a float converts to double exactly)
{
    const _Float16 h = (_Float16)x;
    unsigned short u;
    std::memcpy(&u, &h, 2);
    return u;
}
inline float e4m3_value(unsigned b)
{
    const unsigned sign = b >> 7 & 1, exponent = b >> 3 & 0xf, mantissa = b & 7;
    const float v = exponent == 0 ? std::ldexp((float)mantissa, -9)
                  : (exponent == 15 && mantissa == 7) ? NAN : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
    return sign ? -v : v;
}

// ---- conversions and the SFU ---------------------------------------------------------------------------------
inline unsigned pack_bf16(float lo, float hi) { return bf16_bits(lo) | bf16_bits(hi) << 16; }   // cvt.rn.bf16x2.f32
inline unsigned tf32(float x) { return (__float_as_uint(x) + 0x1000u) & ~0x1fffu; }   // cvt.rna.tf32.f32
inline float exp2_approx(float x) { return std::exp2(x); }                            // ex2.approx.ftz.f32
inline float2 f16x2_to_float2(unsigned h) { return make_float2(f16_value(h & 0xffffu), f16_value(h >> 16)); }
inline void e4m3_to_f16x2(unsigned x, unsigned& lo, unsigned& hi)   // two cvt.rn.f16x2.e4m3x2, exact
{
    lo = f16_bits(e4m3_value(x & 0xffu)) | f16_bits(e4m3_value(x >> 8 & 0xffu)) << 16;
    hi = f16_bits(e4m3_value(x >> 16 & 0xffu)) | f16_bits(e4m3_value(x >> 24)) << 16;
}
inline unsigned sub_f16x2(unsigned a, unsigned b)   // sub.f16x2 (.rn): each half's difference, exact in double
{
    return f16_bits((double)f16_value(a & 0xffffu) - f16_value(b & 0xffffu))
         | f16_bits((double)f16_value(a >> 16) - f16_value(b >> 16)) << 16;
}
inline unsigned fma_f16x2(unsigned a, unsigned b, unsigned c)   // fma.rn.f16x2: each half's a x b + c, rounded once
{
    const auto half = [&](int s) {   // the product is exact in double, and so is its sum with c but for far exponents
        const double x = f16_value(a >> s & 0xffffu), y = f16_value(b >> s & 0xffffu);
        return f16_bits(x * y + f16_value(c >> s & 0xffffu));
    };
    return half(0) | half(16) << 16;
}
inline unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) { return (a & b) | c; }   // lop3.b32 ..., 0xEA
inline float f16_to_float(unsigned h) { return f16_value(h & 0xffffu); }              // cvt.f32.f16
// a predicated 16-byte ld.global.nc (any cache hints), zeros where !live
template <class T> inline uint4 ld_stream(const T* p, bool live)
{
    return live ? *reinterpret_cast<const uint4*>(p) : make_uint4(0u, 0u, 0u, 0u);
}
inline unsigned ld_scale(const unsigned short* p, bool live) { return live ? *p : 0u; }   // ld.global.nc.u16

// ---- cp.async: the copy happens at once --------------------------------------------------------------------
inline void cp_async16(void* dst, const void* src, int src_bytes = 16)
{
    std::memset(dst, 0, 16);
    std::memcpy(dst, src, src_bytes);
}
inline void cp_async16(unsigned dst, const void* src) { cp_async16((void*)(uintptr_t)dst, src); }
inline void cp_async_commit() {}
template <int N_> inline void cp_async_wait() {}

// ---- ldmatrix .x4: lanes 8i .. 8i + 7 give the rows of matrix i; lane 4g + t receives row g, columns 2t and 2t + 1
// of each (with .trans: rows 2t and 2t + 1, column g) ------------------------------------------------------------
inline void ldmatrix(unsigned (&r)[4], const void* p, bool trans)
{
    struct Ask { unsigned* r; bool trans; } ask{r, trans};
    emu_warp_exchange(0xffffffffu, &p, sizeof p, [](EmuSlots slots, void* context) {
        Ask& a = *static_cast<Ask*>(context);
        const unsigned lane = emu_lane(), g = lane / 4, t = lane % 4;
        auto row = [&](unsigned i) { const unsigned short* p; std::memcpy(&p, slots[i], sizeof p); return p; };
        for (unsigned i = 0; i < 4; ++i) {
            const unsigned lo = a.trans ? row(8 * i + 2 * t)[g] : row(8 * i + g)[2 * t];
            const unsigned hi = a.trans ? row(8 * i + 2 * t + 1)[g] : row(8 * i + g)[2 * t + 1];
            a.r[i] = lo | hi << 16;
        }
    }, &ask);
}
inline void ldmatrix_x4(unsigned (&r)[4], const void* p) { ldmatrix(r, p, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) { ldmatrix(r, p, true); }
inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) { ldmatrix(r, (const void*)(uintptr_t)addr, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) { ldmatrix(r, (const void*)(uintptr_t)addr, true); }

// ---- mma.sync m16n8kK: every lane offers its A and B registers, then computes its four elements of d (row g,
// columns 2t and 2t + 1; row g + 8, the same) from A(row, k) and B(k, n) read out of the warp's registers; `round`
// is applied to the sum after every `chunk` products (none for an fp32 accumulator) --------------------------
struct MmaRegisters { unsigned a[4], b[2]; };
using MmaElement = float (*)(const MmaRegisters*, unsigned, unsigned);
inline float keep(float x) { return x; }

inline void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, unsigned depth, MmaElement A,
                MmaElement B, unsigned chunk = 0, float (*round)(float) = keep)
{
    const MmaRegisters mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
    struct Ask {
        float* d;
        unsigned depth;
        MmaElement A, B;
        unsigned chunk;
        float (*round)(float);
    } ask{d, depth, A, B, chunk, round};
    emu_warp_exchange(0xffffffffu, &mine, sizeof mine, [](EmuSlots slots, void* context) {
        Ask& q = *static_cast<Ask*>(context);
        MmaRegisters warp[32];
        for (unsigned l = 0; l < 32; ++l) std::memcpy(&warp[l], slots[l], sizeof warp[l]);
        const unsigned lane = emu_lane(), g = lane / 4, t = lane % 4;
        for (int e = 0; e < 4; ++e) {
            const unsigned row = g + 8 * (e / 2), col = 2 * t + e % 2;
            float sum = q.d[e];
            for (unsigned k = 0; k < q.depth; ++k) {
                sum += q.A(warp, row, k) * q.B(warp, k, col);
                if (q.chunk && k % q.chunk == q.chunk - 1) sum = q.round(sum);
            }
            q.d[e] = sum;
        }
    }, &ask);
}

inline float half_of(unsigned word, unsigned k, float (*value)(unsigned))
{
    return value(k % 2 ? word >> 16 : word & 0xffffu);
}
inline float byte_of(unsigned word, unsigned k) { return e4m3_value(word >> 8 * (k % 4) & 0xffu); }

// m16n8k16 (bf16, f16): A(row, k) in lane 4 (row % 8) + (k % 8) / 2, register row / 8 + 2 (k / 8), half k % 2;
// B(k, n) in lane 4 n + (k % 8) / 2, register k / 8, half k % 2
template <float (*Value)(unsigned)> inline float a16(const MmaRegisters* w, unsigned row, unsigned k)
{
    return half_of(w[4 * (row % 8) + (k % 8) / 2].a[row / 8 + 2 * (k / 8)], k, Value);
}
template <float (*Value)(unsigned)> inline float b16(const MmaRegisters* w, unsigned k, unsigned n)
{
    return half_of(w[4 * n + (k % 8) / 2].b[k / 8], k, Value);
}
inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    mma(d, a, b0, b1, 16, a16<bf16_value>, b16<bf16_value>);
}
inline void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    mma(d, a, b0, b1, 16, a16<f16_value>, b16<f16_value>);
}
// the same, the A registers one by one (as a helper whose asm takes them so is written)
inline void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1)
{
    const unsigned a[4] = {a0, a1, a2, a3};
    mma_bf16(d, a, b0, b1);
}
inline void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1)
{
    const unsigned a[4] = {a0, a1, a2, a3};
    mma_f16(d, a, b0, b1);
}

// m16n8k8 .tf32: A(row, k) in lane 4 (row % 8) + k % 4, register row / 8 + 2 (k / 4); B(k, n) in lane 4 n + k % 4,
// register k / 4
inline void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    mma(d, a, b0, b1, 8,
        [](const MmaRegisters* w, unsigned row, unsigned k) {
            return __uint_as_float(w[4 * (row % 8) + k % 4].a[row / 8 + 2 * (k / 4)]); },
        [](const MmaRegisters* w, unsigned k, unsigned n) { return __uint_as_float(w[4 * n + k % 4].b[k / 4]); });
}

// m16n8k32 .e4m3: A(row, k) in lane 4 (row % 8) + (k % 16) / 4, register row / 8 + 2 (k / 16), byte k % 4;
// B(k, n) in lane 4 n + (k % 16) / 4, register k / 16, byte k % 4
inline float a8(const MmaRegisters* w, unsigned row, unsigned k)
{
    return byte_of(w[4 * (row % 8) + (k % 16) / 4].a[row / 8 + 2 * (k / 16)], k);
}
inline float b8(const MmaRegisters* w, unsigned k, unsigned n) { return byte_of(w[4 * n + (k % 16) / 4].b[k / 16], k); }
inline void mma_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) { mma(d, a, b0, b1, 32, a8, b8); }

// m16n8k32 .e4m3 with an .f16 accumulator: two registers of fp16 pairs (c0, c1 of row g; c2, c3 of row g + 8), the
// sum rounded to fp16 after every 16 products (sm_90's two HMMA.16816.F16)
inline float to_f16(float x) { return (float)(_Float16)x; }
inline void mma_e4m3_f16(unsigned (&d)[2], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    float acc[4] = {f16_value(d[0] & 0xffffu), f16_value(d[0] >> 16), f16_value(d[1] & 0xffffu), f16_value(d[1] >> 16)};
    mma(acc, a, b0, b1, 32, a8, b8, 16, to_f16);
    d[0] = f16_bits(acc[0]) | f16_bits(acc[1]) << 16;
    d[1] = f16_bits(acc[2]) | f16_bits(acc[3]) << 16;
}

// ---- WMMA m16n16k16 bf16 -> fp32 with row-major A and B: fragments of 4 registers (A, B: 8 bf16 a lane) and 8 floats
// (C), whatever struct holds them ------------------------------------------------------------------------------
template <class Fragment> inline unsigned* registers(Fragment& f)
{
    static_assert(sizeof(Fragment) == 16 || sizeof(Fragment) == 32, "a WMMA fragment of 4 or 8 registers");
    return reinterpret_cast<unsigned*>(&f);
}
template <class Fragment, class T> inline void load_bf16(Fragment& f, const T* p, int ld)
{
    static_assert(sizeof(T) == 2, "bf16 elements");
    const unsigned lane = emu_lane();
    unsigned* r = registers(f);
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned e = 8 * lane + 2 * i;
        const unsigned short* at = reinterpret_cast<const unsigned short*>(p) + (size_t)(e / 16) * ld + e % 16;
        r[i] = at[0] | (unsigned)at[1] << 16;
    }
    __syncwarp();   // wmma.load is warp-wide: every lane reads before any goes on
}
template <class Fragment, class T> inline void load_a(Fragment& f, const T* p, int ld) { load_bf16(f, p, ld); }
template <class Fragment, class T> inline void load_b(Fragment& f, const T* p, int ld) { load_bf16(f, p, ld); }

template <class C, class A, class B> inline void mma(C& d, const A& a, const B& b)
{
    struct Pair { unsigned a[4], b[4]; } mine;
    std::memcpy(mine.a, &a, 16);
    std::memcpy(mine.b, &b, 16);
    emu_warp_exchange(0xffffffffu, &mine, sizeof mine, [](EmuSlots slots, void* context) {
        float* out = static_cast<float*>(context);
        auto element = [&](bool of_b, unsigned row, unsigned col) {
            const unsigned e = 16 * row + col;
            Pair p;
            std::memcpy(&p, slots[e / 8], sizeof p);
            const unsigned word = (of_b ? p.b : p.a)[e % 8 / 2];
            return bf16_value(e % 2 ? word >> 16 : word & 0xffffu);
        };
        const unsigned lane = emu_lane();
        for (unsigned i = 0; i < 8; ++i) {
            const unsigned e = 8 * lane + i, row = e / 16, col = e % 16;
            float sum = out[i];
            for (unsigned k = 0; k < 16; ++k) sum += element(false, row, k) * element(true, k, col);
            out[i] = sum;
        }
    }, registers(d));
}

template <class Fragment> inline void store_c(float* p, const Fragment& c, int ld)
{
    const float* values = reinterpret_cast<const float*>(&c);
    for (unsigned i = 0; i < 8; ++i) {
        const unsigned e = 8 * emu_lane() + i;
        p[(size_t)(e / 16) * ld + e % 16] = values[i];
    }
    __syncwarp();
}

}  // namespace emu_ptx
