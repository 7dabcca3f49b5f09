// expect: add_float4_score=0
// status: compile_error
// Loads `b`'s float4 without the cast that `a`'s load has: `b[i]` is one float, and a float does not
// convert to a float4, so the compiler rejects line 10.
extern "C" __global__ void vecadd_float4(float* out, const float* a, const float* b, int n)
{
    const int i = 4 * (blockIdx.x * BLOCK_X + threadIdx.x);
    if (i + 4 > n) return;
    const float4 x = *reinterpret_cast<const float4*>(a + i);
    const float4 y = b[i];
    *reinterpret_cast<float4*>(out + i) = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}
