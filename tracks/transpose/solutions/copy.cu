// Copy: the roof of the ladder. A transpose moves the same bytes as a copy, so a copy kernel with the same
// launch geometry is as fast as a transpose can hope to be. Each block copies one TILE_Y x TILE_X tile.
// Where every row starts on a 16-byte boundary (cols a multiple of 4, both pointers 16-byte aligned) the
// tile is copied as float4s: 32x8 threads move a 32x32 tile as 256 float4s, one each, a 128-bit load and
// store per thread. Otherwise (odd widths) each thread copies TILE_Y / BLOCK_Y floats of one column, loads
// first (`__restrict__` lets the compiler issue them all before the stores).
extern "C" __global__ void copy_kernel(float* __restrict__ out, const float* __restrict__ in, int rows, int cols)
{
    const int bx = blockIdx.x * TILE_X, by = blockIdx.y * TILE_Y;
    const bool aligned = TILE_X % 4 == 0 && cols % 4 == 0
                         && (((unsigned long long)in | (unsigned long long)out) & 15) == 0;
    if (aligned) {
        constexpr int VECS_PER_ROW = TILE_X / 4, VECS = TILE_Y * VECS_PER_ROW, THREADS = BLOCK_X * BLOCK_Y;
        const int t = threadIdx.y * BLOCK_X + threadIdx.x;
#pragma unroll
        for (int k = 0; k < VECS; k += THREADS) {
            const int v = t + k;
            const int row = by + v / VECS_PER_ROW, col = bx + 4 * (v % VECS_PER_ROW);
            if ((VECS % THREADS == 0 || v < VECS) && row < rows && col < cols) {
                const size_t at = (size_t)row * cols + col;
                *reinterpret_cast<float4*>(out + at) = *reinterpret_cast<const float4*>(in + at);
            }
        }
        return;
    }
    const int col = bx + threadIdx.x;
#pragma unroll
    for (int i = 0; i < TILE_X; i += BLOCK_X) {
        if (col + i >= cols) break;
#pragma unroll
        for (int j = 0; j < TILE_Y; j += BLOCK_Y) {
            const int row = by + threadIdx.y + j;
            if (row < rows) out[(size_t)row * cols + col + i] = in[(size_t)row * cols + col + i];
        }
    }
}
