// expect: padded_score=0
// status: incorrect|oob_write
// The padded transpose with `<=` in the write guard: one extra column of `out` per tile gets written,
// which lands in the next row (or past the end of the matrix).
extern "C" __global__ void transpose_padded(float* out, const float* in, int rows, int cols)
{
    __shared__ float tile[TILE_Y][TILE_X + 1];
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y)
        if (col < cols && row0 + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(row0 + j) * cols + col];
    __syncthreads();
    const int out_col = blockIdx.y * TILE_Y + threadIdx.x;
    const int out_row0 = blockIdx.x * TILE_X + threadIdx.y;
    for (int j = 0; j < TILE_X; j += BLOCK_Y)
        if (out_col <= rows && out_row0 + j < cols)
            out[(size_t)(out_row0 + j) * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
}
