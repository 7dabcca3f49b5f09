// expect: wmma_score=1
// status: unmet
// A correct kernel on the FP32 pipes (one thread an element of C, each bf16 widened to fp32 by a shift):
// every kernel of this track must use the tensor cores, so it keeps its correctness point only.
typedef unsigned short bf16;   // the raw bits of a bfloat16

__device__ __forceinline__ float widen(bf16 x) { return __uint_as_float((unsigned)x << 16); }

extern "C" __global__ void tc_wmma(float* C, const bf16* A, const bf16* B, int M, int N, int K)
{
    const int row = blockIdx.y * TILE_Y + threadIdx.y * (TILE_Y / BLOCK_Y);
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    for (int r = row; r < row + TILE_Y / BLOCK_Y; ++r) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += widen(A[(size_t)r * K + k]) * widen(B[(size_t)k * N + col]);
        C[(size_t)r * N + col] = acc;
    }
}
