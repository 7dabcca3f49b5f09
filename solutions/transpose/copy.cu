// Copy: the roof of the ladder. A transpose moves the same bytes as a copy, so a copy kernel with the same
// launch geometry is as fast as a transpose can hope to be. Each block copies one TILE_Y x TILE_X tile;
// each thread copies TILE_Y / BLOCK_Y elements of one column of it. Reads and writes are both coalesced.
extern "C" __global__ void copy_kernel(float* out, const float* in, int rows, int cols)
{
    const int col = blockIdx.x * TILE_X + threadIdx.x;
    const int row0 = blockIdx.y * TILE_Y + threadIdx.y;
    if (col >= cols) return;
    for (int j = 0; j < TILE_Y; j += BLOCK_Y) {
        const int row = row0 + j;
        if (row < rows) out[(size_t)row * cols + col] = in[(size_t)row * cols + col];
    }
}
