// expect: add_float4_score=0
// status: incorrect
// The float4 kernel without the scalar tail: it adds whole float4s only, so when n is not a multiple of 4
// the last n % 4 elements are never written and stay NaN (at n = 1, the only element).
extern "C" __global__ void vecadd_float4(float* __restrict__ out, const float* __restrict__ a,
                                         const float* __restrict__ b, int n)
{
    constexpr int VECS = TILE_X / 4;
    const int first = blockIdx.x * TILE_X;
#pragma unroll
    for (int k = 0; k < VECS; k += BLOCK_X) {
        const int v = k + threadIdx.x;
        const int i = first + 4 * v;
        if ((VECS % BLOCK_X != 0 && v >= VECS) || i + 4 > n) break;
        const float4 x = *reinterpret_cast<const float4*>(a + i);
        const float4 y = *reinterpret_cast<const float4*>(b + i);
        *reinterpret_cast<float4*>(out + i) = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}
