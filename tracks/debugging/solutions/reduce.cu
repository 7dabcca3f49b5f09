// The fix: a barrier after every level of the tree (and before the first), for every level down to the last:
// since Volta the threads of a warp are scheduled independently, so no level may skip it.
extern "C" __global__ void block_sum(float* out, const float* x, int rows, int cols)
{
    __shared__ float buf[BLOCK_X];
    const int row = blockIdx.x, tid = threadIdx.x;
    float v = 0.0f;
    for (int c = tid; c < cols; c += BLOCK_X) v += x[(size_t)row * cols + c];
    buf[tid] = v;
    __syncthreads();
    for (int s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[row] = buf[0];
}
