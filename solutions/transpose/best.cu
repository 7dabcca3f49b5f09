// "Your best" reference: the padded tile, written for any tile that is a multiple of the block (the
// student picks BLOCK_X x BLOCK_Y threads and a TILE_X x TILE_Y tile), with __restrict__ pointers and
// unrolled loops. Row stride TILE_X + 1 keeps column reads free of bank conflicts for any even TILE_X.
extern "C" __global__ void transpose_best(float* __restrict__ out, const float* __restrict__ in, int rows, int cols)
{
    __shared__ float tile[TILE_Y][TILE_X + 1];
    const int bx = blockIdx.x * TILE_X, by = blockIdx.y * TILE_Y;
#pragma unroll
    for (int j = threadIdx.y; j < TILE_Y; j += BLOCK_Y)
#pragma unroll
        for (int i = threadIdx.x; i < TILE_X; i += BLOCK_X)
            if (by + j < rows && bx + i < cols) tile[j][i] = in[(size_t)(by + j) * cols + bx + i];
    __syncthreads();
#pragma unroll
    for (int j = threadIdx.y; j < TILE_X; j += BLOCK_Y)        // a row of the output tile: column bx + j of `in`
#pragma unroll
        for (int i = threadIdx.x; i < TILE_Y; i += BLOCK_X)    // a column of it: row by + i of `in`
            if (bx + j < cols && by + i < rows) out[(size_t)(bx + j) * rows + by + i] = tile[i][j];
}
