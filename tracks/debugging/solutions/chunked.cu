// The fix: no barrier inside the loop at all (each warp's lane 0 adds to its own slot; lanes past the row's end
// add 0), and one barrier after it, which every thread reaches, before warp 0 reads the other warps' slots.
extern "C" __global__ void chunked_sum(float* out, const float* x, int rows, int cols)
{
    __shared__ float partial[BLOCK_X / 32];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float* in = x + (size_t)blockIdx.x * cols;
    if (lane == 0) partial[warp] = 0.0f;
    for (int c0 = 0; c0 < cols; c0 += BLOCK_X) {
        const int c = c0 + tid;
        float v = c < cols ? in[c] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) partial[warp] += v;
    }
    __syncthreads();
    if (warp == 0) {
        float v = lane < BLOCK_X / 32 ? partial[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
