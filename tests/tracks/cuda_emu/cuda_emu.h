// A tiny CPU stand-in for the CUDA C++ that the GEMM references use, so that their logic can be tested on
// a machine without a GPU: each block runs as BLOCK_X * BLOCK_Y std::threads that meet at a std::barrier
// in __syncthreads(); blocks run one after another, so `__shared__` (static storage) is the block's own.
// It checks indexing, tiling, guards and synchronization, not speed, and knows nothing of warps.
#pragma once
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* emu_barrier = nullptr;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
template <class T> inline T __ldg(const T* p) { return *p; }
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
                std::vector<std::thread> threads;
                threads.reserve(n);
                for (unsigned t = 0; t < n; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        kernel();
                    });
                for (auto& th : threads) th.join();
            }
}
