// expect: swiglu_score=0
// status: compile_error
// SwiGLU written with cuda_bf16.h's types and conversions (__nv_bfloat16, __bfloat162float, __float2bfloat16), as
// vLLM's silu_and_mul is: the grader's NVRTC compiles the cell without that header, so the names are undefined. Here
// a bf16 is its raw bits, an unsigned short, and one cvt.rn.bf16x2.f32 rounds two floats.

extern "C" __global__ void swiglu_fused(unsigned short* out, const unsigned short* x, int tokens, int d)
{
    const int token = blockIdx.y, column = blockIdx.x * BLOCK_X + threadIdx.x;
    if (token >= tokens || column >= d) return;
    const __nv_bfloat16* row = reinterpret_cast<const __nv_bfloat16*>(x) + (size_t)token * 2 * d;
    const float g = __bfloat162float(row[column]), u = __bfloat162float(row[d + column]);
    reinterpret_cast<__nv_bfloat16*>(out)[(size_t)token * d + column] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
}
