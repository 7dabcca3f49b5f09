// expect: wmma_score=0
// status: compile_error
// The WMMA kernel with its pointers typed __nv_bfloat16, as in host code that includes <cuda_bf16.h>: NVRTC
// compiles the cell without that header, so the type is undefined ("identifier "__nv_bfloat16" is undefined");
// the notebook's kernels take the raw bits as unsigned short.
struct FragA { unsigned x[4]; };   // 16 x 16 bf16, row-major A: 8 values a lane, two per register
struct FragB { unsigned x[4]; };   // 16 x 16 bf16, row-major B
struct FragC { float x[8]; };      // 16 x 16 fp32 accumulators: 8 a lane

__device__ __forceinline__ void load_a(FragA& f, const __nv_bfloat16* p, int ld)
{
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.global.bf16 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3]) : "l"(p), "r"(ld));
}

__device__ __forceinline__ void load_b(FragB& f, const __nv_bfloat16* p, int ld)
{
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.global.bf16 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3]) : "l"(p), "r"(ld));
}

__device__ __forceinline__ void mma(FragC& d, const FragA& a, const FragB& b)
{
    asm volatile("wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
                 "{%0, %1, %2, %3, %4, %5, %6, %7};"
                 : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]),
                   "+f"(d.x[4]), "+f"(d.x[5]), "+f"(d.x[6]), "+f"(d.x[7])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]),
                   "r"(b.x[0]), "r"(b.x[1]), "r"(b.x[2]), "r"(b.x[3]));
}

__device__ __forceinline__ void store_c(float* p, const FragC& c, int ld)
{
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "l"(p), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]),
                    "f"(c.x[4]), "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]), "r"(ld) : "memory");
}

extern "C" __global__ void tc_wmma(float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K)
{
    const int warp = threadIdx.y;                      // 4 warps: a 2 x 2 grid of 16 x 16 tiles
    const int row = blockIdx.y * TILE_Y + (warp / 2) * 16;
    const int col = blockIdx.x * TILE_X + (warp % 2) * 16;
    FragC acc;
    for (int i = 0; i < 8; ++i) acc.x[i] = 0.0f;
    FragA a;
    FragB b;
    for (int k = 0; k < K; k += 16) {
        load_a(a, A + (size_t)row * K + k, K);
        load_b(b, B + (size_t)k * N + col, N);
        mma(acc, a, b);
    }
    store_c(C + (size_t)row * N + col, acc, N);
}
