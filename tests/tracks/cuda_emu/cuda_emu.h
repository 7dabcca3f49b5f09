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
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }

inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* emu_barrier = nullptr;

// One warp's meeting point: a barrier of its threads and the value each lane offers to a shuffle.
struct EmuWarp {
    std::barrier<>* barrier;
    float offered[32];
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
inline float fmaf_emu(float a, float b, float c) { return std::fma(a, b, c); }

// Launch `kernel` over `grid` blocks of `block` threads, one block at a time.
inline void emu_launch(dim3 grid, dim3 block, const std::function<void()>& kernel)
{
    gridDim = grid;
    blockDim = block;
    const unsigned n = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                std::barrier<> barrier(n);
                emu_barrier = &barrier;
                std::deque<std::barrier<>> warp_barriers;   // barriers cannot move: a deque keeps them in place
                std::vector<EmuWarp> warps;
                for (unsigned w = 0; w < (n + 31) / 32; ++w) {
                    warp_barriers.emplace_back(std::min(32u, n - 32 * w));
                    warps.push_back({&warp_barriers.back(), {}});
                }
                emu_warps = &warps;
                std::vector<std::thread> threads;
                threads.reserve(n);
                for (unsigned t = 0; t < n; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        emu_linear = t;
                        kernel();
                    });
                for (auto& th : threads) th.join();
            }
}
