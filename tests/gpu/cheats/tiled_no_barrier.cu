// The shared-memory transpose without the barrier between filling the tile and reading it back: a warp may
// read a tile entry another warp has not written yet. Often right on a GPU anyway; racecheck sees the race.
extern "C" __global__ void transpose_tiled(float* out, const float* in, int rows, int cols)
{
    __shared__ float tile[TILE_Y][TILE_X];
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y)
        if (col < cols && row0 + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(row0 + j) * cols + col];
    const int out_col = blockIdx.y * TILE_Y + threadIdx.x;
    const int out_row0 = blockIdx.x * TILE_X + threadIdx.y;
    for (int j = 0; j < TILE_X; j += BLOCK_Y)
        if (out_col < rows && out_row0 + j < cols)
            out[(size_t)(out_row0 + j) * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
}
