// 3. Shared-memory cache blocking: the block walks along K in steps of BK, staging a TILE_Y x BK slab of A
// and a BK x TILE_X slab of B in shared memory; each value loaded from global memory is then used by
// TILE_X (or TILE_Y) threads instead of one. One output element per thread (32 x 32 threads, 32 x 32 tile,
// BK = 32). Out-of-range elements of the slabs are loaded as 0, so any M, N, K works.
extern "C" __global__ void sgemm_smem(float* C, const float* A, const float* B, int M, int N, int K)
{
    __shared__ float As[TILE_Y][BK];
    __shared__ float Bs[BK][TILE_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_Y + ty;
    const int col = blockIdx.x * TILE_X + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int k = tx; k < BK; k += BLOCK_X)
            As[ty][k] = (row < M && k0 + k < K) ? A[(size_t)row * K + k0 + k] : 0.0f;
        for (int k = ty; k < BK; k += BLOCK_Y)
            Bs[k][tx] = (k0 + k < K && col < N) ? B[(size_t)(k0 + k) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k)
            acc += As[ty][k] * Bs[k][tx];   // As: one address per warp (broadcast); Bs: 32 consecutive words
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
