// The CUDA C++ a kernel sees in the CPU preview (graders/cuda_engine/preview.py): g++ compiles the kernel with
// this header (precompiled) and links it with runtime.cpp, which runs one block at a time on one CPU thread.
// Each CUDA thread of a block is a fiber that runs until it reaches a barrier (__syncthreads, or a warp-level
// call such as __shfl_xor_sync or __syncwarp), then another runs, in a fixed order (runtime.cpp's run_block); a
// barrier opens when every thread it waits for that has not returned has reached it. `__shared__` variables are
// static storage in the section emu_shared, which the runtime poisons at the start of every block. It checks
// indexing, bounds and synchronization, not speed or the GPU's memory model.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>

#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 900
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static __attribute__((section("emu_shared")))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

struct dim3 { unsigned x = 1, y = 1, z = 1; };
using uint3 = dim3;
extern dim3 threadIdx, blockIdx, blockDim, gridDim;
constexpr int warpSize = 32;

struct alignas(8) float2 { float x, y; };
struct float3 { float x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(4) ushort2 { unsigned short x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }
inline ushort2 make_ushort2(unsigned short x, unsigned short y) { return {x, y}; }

// ---- bits and conversions ------------------------------------------------------------------------------------
template <class To, class From> inline To emu_bits(From from)
{
    static_assert(sizeof(To) == sizeof(From));
    To to;
    std::memcpy(&to, &from, sizeof to);
    return to;
}
inline float __uint_as_float(unsigned u) { return emu_bits<float>(u); }
inline float __int_as_float(int i) { return emu_bits<float>(i); }
inline unsigned __float_as_uint(float f) { return emu_bits<unsigned>(f); }
inline int __float_as_int(float f) { return emu_bits<int>(f); }
inline double __longlong_as_double(long long i) { return emu_bits<double>(i); }
inline long long __double_as_longlong(double d) { return emu_bits<long long>(d); }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)std::floor(x); }
inline int __float2int_ru(float x) { return (int)std::ceil(x); }
inline unsigned __float2uint_rn(float x) { return (unsigned)std::nearbyint(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x)
{
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const unsigned long long both = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)(both >> 8 * ((s >> 4 * i) & 7) & 0xff) << 8 * i;
    return r;
}

// ---- arithmetic: CUDA's overloaded min and max, and its intrinsics (here at full precision) -------------------
template <class A, class B> constexpr bool emu_integral = std::is_integral_v<A> && std::is_integral_v<B>;
template <class A, class B> constexpr bool emu_floating = std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
    && (std::is_floating_point_v<A> || std::is_floating_point_v<B>);
template <class A, class B, std::enable_if_t<emu_integral<A, B>, int> = 0>
inline std::common_type_t<A, B> min(A a, B b) { using T = std::common_type_t<A, B>; return (T)a < (T)b ? (T)a : (T)b; }
template <class A, class B, std::enable_if_t<emu_integral<A, B>, int> = 0>
inline std::common_type_t<A, B> max(A a, B b) { using T = std::common_type_t<A, B>; return (T)a < (T)b ? (T)b : (T)a; }
template <class A, class B, std::enable_if_t<emu_floating<A, B>, int> = 0>   // fmin, fmax: NaN loses
inline std::common_type_t<A, B> min(A a, B b) { using T = std::common_type_t<A, B>; return std::fmin((T)a, (T)b); }
template <class A, class B, std::enable_if_t<emu_floating<A, B>, int> = 0>
inline std::common_type_t<A, B> max(A a, B b) { using T = std::common_type_t<A, B>; return std::fmax((T)a, (T)b); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x != x ? 0.0f : x; }
inline float exp10f(float x) { return std::pow(10.0f, x); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
inline unsigned long long __cvta_generic_to_shared(const void* p) { return (unsigned long long)p; }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
inline void __nanosleep(unsigned) {}
long long clock64();
inline int clock() { return (int)clock64(); }
inline void __trap() { __builtin_trap(); }
inline void __brkpt() { __builtin_trap(); }

// ---- atomics: one CUDA thread runs at a time, so a plain read-modify-write is atomic ---------------------------
template <class T> inline T emu_rmw(T* p, T v, T (*f)(T, T)) { const T old = *p; *p = f(old, v); return old; }
template <class T> inline T atomicAdd(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return (T)(a + b); }); }
template <class T> inline T atomicSub(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return (T)(a - b); }); }
template <class T> inline T atomicExch(T* p, T v) { return emu_rmw<T>(p, v, [](T, T b) { return b; }); }
template <class T> inline T atomicMin(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return b < a ? b : a; }); }
template <class T> inline T atomicMax(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return a < b ? b : a; }); }
template <class T> inline T atomicAnd(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return (T)(a & b); }); }
template <class T> inline T atomicOr(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return (T)(a | b); }); }
template <class T> inline T atomicXor(T* p, T v) { return emu_rmw<T>(p, v, [](T a, T b) { return (T)(a ^ b); }); }
inline unsigned atomicInc(unsigned* p, unsigned v) { const unsigned old = *p; *p = old >= v ? 0 : old + 1; return old; }
inline unsigned atomicDec(unsigned* p, unsigned v)
{
    const unsigned old = *p;
    *p = (old == 0 || old > v) ? v : old - 1;
    return old;
}
template <class T> inline T atomicCAS(T* p, T compare, T v)
{
    const T old = *p;
    if (old == compare) *p = v;
    return old;
}
#define EMU_ATOMIC_SCOPES(name) \
    template <class... A> inline auto name##_block(A... a) { return name(a...); } \
    template <class... A> inline auto name##_system(A... a) { return name(a...); }
EMU_ATOMIC_SCOPES(atomicAdd) EMU_ATOMIC_SCOPES(atomicSub) EMU_ATOMIC_SCOPES(atomicExch) EMU_ATOMIC_SCOPES(atomicMin)
EMU_ATOMIC_SCOPES(atomicMax) EMU_ATOMIC_SCOPES(atomicCAS) EMU_ATOMIC_SCOPES(atomicOr) EMU_ATOMIC_SCOPES(atomicAnd)
#undef EMU_ATOMIC_SCOPES

// ---- barriers and warps (runtime.cpp) ----------------------------------------------------------------------
void __syncthreads();
int __syncthreads_count(int predicate);
int __syncthreads_and(int predicate);
int __syncthreads_or(int predicate);
void __syncwarp(unsigned mask = 0xffffffffu);
unsigned emu_lane();
// The warp's lanes in `mask` meet; each offers `size` bytes at `mine` (EMU_SLOT at most); `gather(slots, context)`
// then reads the offers (by lane) before the lanes meet again, so that the next exchange cannot overwrite them.
constexpr std::size_t EMU_SLOT = 32;
using EmuSlots = const unsigned char (*)[EMU_SLOT];
void emu_warp_exchange(unsigned mask, const void* mine, std::size_t size, void (*gather)(EmuSlots, void*),
                       void* context);

template <class T> inline T emu_shuffle(unsigned mask, T value, int source)
{
    static_assert(sizeof(T) <= EMU_SLOT, "a shuffle moves at most EMU_SLOT bytes here");
    struct Ask { int source; T got; } ask{source, value};
    emu_warp_exchange(mask, &value, sizeof(T), [](EmuSlots slots, void* context) {
        Ask& a = *static_cast<Ask*>(context);
        std::memcpy(&a.got, slots[a.source], sizeof(T));
    }, &ask);
    return ask.got;
}
inline int emu_segment(int width) { return (int)emu_lane() / width * width; }
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    return emu_shuffle(mask, v, emu_segment(width) + (src % width + width) % width);
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    const int lane = (int)emu_lane(), other = lane ^ lane_mask;
    return emu_shuffle(mask, v, other / width == lane / width ? other : lane);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    const int lane = (int)emu_lane();
    return emu_shuffle(mask, v, lane % width + (int)delta < width ? lane + (int)delta : lane);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    const int lane = (int)emu_lane();
    return emu_shuffle(mask, v, lane % width >= (int)delta ? lane - (int)delta : lane);
}
unsigned __ballot_sync(unsigned mask, int predicate);
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, !predicate) == 0; }
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
unsigned __activemask();
template <class T> inline T __reduce_add_sync(unsigned mask, T v)
{
    T sum = v;
    for (int i = 1; i < 32; i *= 2) sum += __shfl_xor_sync(mask, sum, i);
    return sum;
}

// ---- the call from the runtime: the kernel's pointer parameters from `pointers`, its integers from `ints` ------
template <class T> inline T emu_argument(void* const* pointers, const long long* ints, int& p, int& n)
{
    if constexpr (std::is_pointer_v<T>) return static_cast<T>(pointers[p++]);
    else return static_cast<T>(ints[n++]);
}
template <class... A> inline void emu_call(void (*kernel)(A...), void* const* pointers, const long long* ints)
{
    int p = 0, n = 0;
    std::tuple<A...> args{emu_argument<A>(pointers, ints, p, n)...};   // braces: evaluated left to right
    std::apply(kernel, args);
}
template <class... A> constexpr int emu_pointer_count(void (*)(A...)) { return (0 + ... + std::is_pointer_v<A>); }
template <class... A> constexpr int emu_int_count(void (*)(A...)) { return (0 + ... + !std::is_pointer_v<A>); }
