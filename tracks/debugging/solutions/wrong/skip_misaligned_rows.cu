// expect: copy_score=0
// status: incorrect
// The fault masked, not fixed: a row whose start is not 16-byte aligned skips the float4 loop, so all but its
// last cols % 4 elements are never copied.
extern "C" __global__ void copy_rows(float* out, const float* in, int rows, int cols)
{
    const size_t start = (size_t)blockIdx.x * cols;
    const float4* src = reinterpret_cast<const float4*>(in + start);
    float4* dst = reinterpret_cast<float4*>(out + start);
    const int vectors = cols / 4;
    if (start % 4 == 0)
        for (int i = threadIdx.x; i < vectors; i += BLOCK_X) dst[i] = src[i];
    for (int c = 4 * vectors + threadIdx.x; c < cols; c += BLOCK_X) out[start + c] = in[start + c];
}
