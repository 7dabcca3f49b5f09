// Coalesced transpose through shared memory: a block reads a 32x32 tile of `in` row by row (coalesced),
// and writes it to `out` row by row (coalesced) reading the tile by columns. 32x8 threads, 4 elements each.
// Padding each row to 33 floats puts the 32 elements of a column in 32 different banks: no conflicts.
extern "C" __global__ void transpose_padded(float* out, const float* in, int rows, int cols)
{
    __shared__ float tile[TILE_Y][TILE_X + 1];   // one column of padding
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y)
        if (col < cols && row0 + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(row0 + j) * cols + col];
    __syncthreads();
    const int out_col = blockIdx.y * TILE_Y + threadIdx.x;    // a row index of `in`
    const int out_row0 = blockIdx.x * TILE_X + threadIdx.y;   // a column index of `in`
    for (int j = 0; j < TILE_X; j += BLOCK_Y)
        if (out_col < rows && out_row0 + j < cols)
            out[(size_t)(out_row0 + j) * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
}
