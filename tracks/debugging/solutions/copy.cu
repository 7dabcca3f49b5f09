// The fix: each row's first elements up to a 16-byte boundary one at a time, then float4s from that aligned
// address, then the tail one at a time (the buffers themselves start 16-byte aligned).
extern "C" __global__ void copy_rows(float* out, const float* in, int rows, int cols)
{
    const size_t start = (size_t)blockIdx.x * cols;
    const int head = min(cols, (int)((4 - start % 4) % 4));
    const int vectors = (cols - head) / 4;
    const float4* src = reinterpret_cast<const float4*>(in + start + head);
    float4* dst = reinterpret_cast<float4*>(out + start + head);
    for (int c = threadIdx.x; c < head; c += BLOCK_X) out[start + c] = in[start + c];
    for (int i = threadIdx.x; i < vectors; i += BLOCK_X) dst[i] = src[i];
    for (int c = head + 4 * vectors + threadIdx.x; c < cols; c += BLOCK_X) out[start + c] = in[start + c];
}
