// expect: wgmma_score=1
// status: unmet
// A correct tensor-core kernel without wgmma: each warp multiplies its 16 rows of the tile with mma.sync m16n8k16,
// its fragments loaded straight from global memory (32-bit pairs of bf16). Its SASS has HMMA and no HGMMA, so the
// wgmma step keeps its correctness point only.
typedef unsigned short bf16;   // the raw bits of a bfloat16

__device__ __forceinline__ unsigned pair(const bf16* p) { return *reinterpret_cast<const unsigned*>(p); }

extern "C" __global__ void hopper_wgmma(float* C, const bf16* A, const bf16* B, int M, int N, int K)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int row = blockIdx.y * TILE_Y + 16 * warp + g, n0 = blockIdx.x * TILE_X;
    float d[TILE_X / 8][4] = {};
    for (int k = 0; k < K; k += 16) {
        const unsigned a0 = pair(&A[(size_t)row * K + k + 2 * t]), a1 = pair(&A[(size_t)(row + 8) * K + k + 2 * t]);
        const unsigned a2 = pair(&A[(size_t)row * K + k + 8 + 2 * t]);
        const unsigned a3 = pair(&A[(size_t)(row + 8) * K + k + 8 + 2 * t]);
#pragma unroll
        for (int j = 0; j < TILE_X / 8; ++j) {
            const bf16* column = &B[(size_t)(n0 + 8 * j + g) * K + k + 2 * t];   // B is K-major: column n at B + n K
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                         "{%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(pair(column)), "r"(pair(column + 8)));
        }
    }
#pragma unroll
    for (int j = 0; j < TILE_X / 8; ++j) {
        const int col = n0 + 8 * j + 2 * t;
        *reinterpret_cast<float2*>(&C[(size_t)row * N + col]) = make_float2(d[j][0], d[j][1]);
        *reinterpret_cast<float2*>(&C[(size_t)(row + 8) * N + col]) = make_float2(d[j][2], d[j][3]);
    }
}
