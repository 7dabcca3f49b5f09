// expect: smem_score=0
// status: incorrect
// Kernel 3 whose K loop stops at the last whole slab (k0 + BK <= K): when K is not a multiple of BK the
// last K % BK products of every dot product are missing. Only a few percent of each sum, but far outside
// fp32 rounding error.
extern "C" __global__ void sgemm_smem(float* C, const float* A, const float* B, int M, int N, int K)
{
    __shared__ float As[TILE_Y][BK];
    __shared__ float Bs[BK][TILE_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_Y + ty;
    const int col = blockIdx.x * TILE_X + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 + BK <= K; k0 += BK) {
        As[ty][tx] = row < M ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = col < N ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BK; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
