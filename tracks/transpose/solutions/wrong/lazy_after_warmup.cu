// expect: padded_score=0
// status: incorrect
// Correct for its first 200000 blocks (the correctness checks and the start of timing), then every block
// returns at once: fast, wrong results. The check of every timed launch catches it.
__device__ unsigned int blocks_run = 0;

extern "C" __global__ void transpose_padded(float* out, const float* in, int rows, int cols)
{
    __shared__ float tile[TILE_Y][TILE_X + 1];
    __shared__ unsigned int ticket;
    if (threadIdx.x == 0 && threadIdx.y == 0) ticket = atomicAdd(&blocks_run, 1u);
    __syncthreads();
    if (ticket > 200000u) return;
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y)
        if (col < cols && row0 + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(row0 + j) * cols + col];
    __syncthreads();
    const int out_col = blockIdx.y * TILE_Y + threadIdx.x;
    const int out_row0 = blockIdx.x * TILE_X + threadIdx.y;
    for (int j = 0; j < TILE_X; j += BLOCK_Y)
        if (out_col < rows && out_row0 + j < cols)
            out[(size_t)(out_row0 + j) * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
}
