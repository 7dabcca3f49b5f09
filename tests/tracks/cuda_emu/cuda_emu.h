// A tiny CPU stand-in for the CUDA C++ that the GEMM references use, so that their logic can be tested on
// a machine without a GPU: each block runs as BLOCK_X * BLOCK_Y std::threads that meet at a std::barrier
// in __syncthreads(); blocks run one after another, so `__shared__` (static storage) is the block's own.
// It checks indexing, tiling, guards and synchronization, not speed. Warps are the block's threads in
// groups of 32 by linear index; a shuffle or __syncwarp() meets the warp's threads at a barrier of its own.
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }

inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* emu_barrier = nullptr;

// One warp's meeting point: a barrier of its threads and what each lane offers to a shuffle, an ldmatrix
// (a row address) or an mma (its A and B fragments).
struct EmuWarp {
    std::barrier<>* barrier;
    float offered[32];
    const void* address[32];
    unsigned fragments[32][6];
};
inline std::vector<EmuWarp>* emu_warps = nullptr;
inline thread_local unsigned emu_linear = 0;   // the thread's linear index in its block

inline EmuWarp& emu_warp() { return (*emu_warps)[emu_linear / 32]; }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp().barrier->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float value, int lane_mask)
{
    EmuWarp& warp = emu_warp();
    const unsigned lane = emu_linear % 32;
    warp.offered[lane] = value;
    warp.barrier->arrive_and_wait();
    const float got = warp.offered[lane ^ lane_mask];
    warp.barrier->arrive_and_wait();   // every lane has read before the next shuffle overwrites
    return got;
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
template <class T> inline T __ldg(const T* p) { return *p; }
inline int min(int a, int b) { return a < b ? a : b; }   // CUDA's integer min
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline unsigned long long __cvta_generic_to_shared(const void* p) { return (unsigned long long)p; }
inline float fmaf_emu(float a, float b, float c) { return std::fma(a, b, c); }

// Launch `kernel` over `grid` blocks of `block` threads, one block at a time. The threads are made once per
// launch: after each block they meet at a barrier whose completion sets the next block's index.
inline void emu_launch(dim3 grid, dim3 block, const std::function<void()>& kernel)
{
    gridDim = grid;
    blockDim = block;
    const unsigned n = block.x * block.y * block.z, blocks = grid.x * grid.y * grid.z;
    if (n == 0 || blocks == 0) return;
    std::barrier<> barrier(n);
    emu_barrier = &barrier;
    std::deque<std::barrier<>> warp_barriers;   // barriers cannot move: a deque keeps them in place
    std::vector<EmuWarp> warps;
    for (unsigned w = 0; w < (n + 31) / 32; ++w) {
        warp_barriers.emplace_back(std::min(32u, n - 32 * w));
        warps.push_back({&warp_barriers.back(), {}});
    }
    emu_warps = &warps;
    unsigned next = 0;   // the linear index of the block to run next
    auto next_block = [&]() noexcept {
        blockIdx = {next % grid.x, next / grid.x % grid.y, next / (grid.x * grid.y)};
        ++next;
    };
    next_block();
    std::barrier block_done(n, next_block);
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (unsigned t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            emu_linear = t;
            for (unsigned b = 0; b < blocks; ++b) {
                kernel();
                block_done.arrive_and_wait();
            }
        });
    for (auto& th : threads) th.join();
}

// ---- The inline PTX of the tensor-core kernels, by the names and signatures of their wrappers --------------
// tests/tracks/test_attention_emulated.py drops a kernel's own wrappers (the functions whose body is `asm`)
// and these take their place. Each follows the PTX ISA's definition element by element: ldmatrix's and
// mma.sync m16n8k16's fragment layouts (lane l = 4 g + t), cp.async as a copy done at once (so commit and wait
// are no-ops; the barriers around the buffers are still real), cvt.rn.bf16x2 rounding to nearest even.
inline float emu_bf16_value(unsigned bits16) { return __uint_as_float(bits16 << 16); }
inline unsigned emu_bf16_bits(float f)
{
    unsigned u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;   // NaN
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

inline void cp_async16(void* dst, const void* src, int src_bytes = 16)
{
    std::memset(dst, 0, 16);
    std::memcpy(dst, src, src_bytes);
}
inline void cp_async_commit() {}
template <int N_> inline void cp_async_wait() {}

// ldmatrix .x4: lanes 8i .. 8i + 7 give the rows of matrix i; lane 4g + t receives row g, columns 2t and
// 2t + 1 of each (with .trans: rows 2t and 2t + 1, column g)
inline void emu_ldmatrix_x4(unsigned (&r)[4], const void* p, bool trans)
{
    EmuWarp& warp = emu_warp();
    const unsigned lane = emu_linear % 32, g = lane / 4, t = lane % 4;
    warp.address[lane] = p;
    warp.barrier->arrive_and_wait();
    for (int i = 0; i < 4; ++i) {
        const unsigned short* const* rows = reinterpret_cast<const unsigned short* const*>(warp.address + 8 * i);
        const unsigned lo = trans ? rows[2 * t][g] : rows[g][2 * t];
        const unsigned hi = trans ? rows[2 * t + 1][g] : rows[g][2 * t + 1];
        r[i] = lo | hi << 16;
    }
    warp.barrier->arrive_and_wait();
}
inline void ldmatrix_x4(unsigned (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, true); }

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d (row g, cols 2t, 2t + 1; row g + 8, the same) += A B.
// A(row, k) is in lane 4 (row % 8) + (k % 8) / 2, register row / 8 + 2 (k / 8), half k % 2;
// B(k, n) in lane 4 n + (k % 8) / 2, register k / 8, half k % 2.
inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    EmuWarp& warp = emu_warp();
    const unsigned lane = emu_linear % 32, g = lane / 4, t = lane % 4;
    unsigned* mine = warp.fragments[lane];
    for (int i = 0; i < 4; ++i) mine[i] = a[i];
    mine[4] = b0;
    mine[5] = b1;
    warp.barrier->arrive_and_wait();
    auto half = [](unsigned word, unsigned k) { return emu_bf16_value(k % 2 ? word >> 16 : word & 0xffffu); };
    auto A = [&](unsigned row, unsigned k) {
        return half(warp.fragments[4 * (row % 8) + (k % 8) / 2][row / 8 + 2 * (k / 8)], k);
    };
    auto B = [&](unsigned k, unsigned n) { return half(warp.fragments[4 * n + (k % 8) / 2][4 + k / 8], k); };
    float result[4];
    for (int e = 0; e < 4; ++e) {
        const unsigned row = g + 8 * (e / 2), col = 2 * t + e % 2;
        float sum = d[e];
        for (unsigned k = 0; k < 16; ++k) sum += A(row, k) * B(k, col);
        result[e] = sum;
    }
    warp.barrier->arrive_and_wait();   // every lane has read the fragments before the next mma offers its own
    for (int e = 0; e < 4; ++e) d[e] = result[e];
}

inline unsigned pack_bf16(float lo, float hi) { return emu_bf16_bits(lo) | emu_bf16_bits(hi) << 16; }
inline float exp2_approx(float x) { return std::exp2(x); }
