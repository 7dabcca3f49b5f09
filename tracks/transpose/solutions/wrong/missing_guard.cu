// expect: tiled_score=0
// status: incorrect|oob_write|crashed
// The tiled transpose without bounds checks: fine when rows and cols are multiples of 32, wrong otherwise.
extern "C" __global__ void transpose_tiled(float* out, const float* in, int rows, int cols)
{
    __shared__ float tile[TILE_Y][TILE_X];
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y)
        tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(row0 + j) * cols + col];
    __syncthreads();
    const int out_col = blockIdx.y * TILE_Y + threadIdx.x;
    const int out_row0 = blockIdx.x * TILE_X + threadIdx.y;
    for (int j = 0; j < TILE_X; j += BLOCK_Y)
        out[(size_t)(out_row0 + j) * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
}
