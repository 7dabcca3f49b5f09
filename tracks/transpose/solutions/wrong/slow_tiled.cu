// expect: tiled_score=1
// status: ok
// The naive transpose (strided writes, no shared memory) handed in as the tiled kernel: correct under the
// tiled launch geometry (4 elements per thread), but as slow as the naive one.
extern "C" __global__ void transpose_tiled(float* out, const float* in, int rows, int cols)
{
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y)
        if (col < cols && row0 + j < rows) out[(size_t)col * rows + row0 + j] = in[(size_t)(row0 + j) * cols + col];
}
