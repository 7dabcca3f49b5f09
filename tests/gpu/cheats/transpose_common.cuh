// Shared by the transpose cheats: a naive-order transpose of this block's TILE_X x TILE_Y tile (no shared
// memory), launched as the padded step (TILE, BLOCK from the grader's -D defines).
__device__ void naive_tile(float* out, const float* in, int rows, int cols)
{
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    for (int j = threadIdx.y; j < TILE_Y; j += BLOCK_Y) {
        const int row = blockIdx.y * TILE_Y + j;
        if (row < rows && col < cols) out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
    }
}

// True in exactly one thread of the grid: the last block to get here, once every other block has finished.
__device__ unsigned int blocks_done = 0;
__device__ bool last_block_of_launch()
{
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        __threadfence();
        last = atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1;
        if (last) blocks_done = 0;
    }
    __syncthreads();
    return last && threadIdx.x == 0 && threadIdx.y == 0;
}
