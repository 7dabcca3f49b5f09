import torch
import torch.nn as nn
from graders.model_engine.cuda_kernels import cuda_kernel

SOFTMAX = r"""
#define PER 4
__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
extern "C" __global__ void __launch_bounds__(1024) softmax_rows(float* out, const float* x, int cols) {
    __shared__ float maxes[32], sums[32];
    const float NEG = __int_as_float(0xff800000);
    const float4* row = reinterpret_cast<const float4*>(x + (size_t)blockIdx.x * cols);
    float4* orow = reinterpret_cast<float4*>(out + (size_t)blockIdx.x * cols);
    int c4 = cols / 4, lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    float4 v[PER];
    float m = NEG;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < c4) {
            v[k] = row[i];
            m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
        }
    }
    m = warp_max(m);
    if (lane == 0) maxes[warp] = m;
    __syncthreads();
    m = warp_max(lane < warps ? maxes[lane] : NEG);
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < c4) {
            v[k].x = __expf(v[k].x - m); v[k].y = __expf(v[k].y - m);
            v[k].z = __expf(v[k].z - m); v[k].w = __expf(v[k].w - m);
            s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
    }
    s = warp_sum(s);
    if (lane == 0) sums[warp] = s;
    __syncthreads();
    float inv = 1.0f / warp_sum(lane < warps ? sums[lane] : 0.0f);
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < c4) {
            v[k].x *= inv; v[k].y *= inv; v[k].z *= inv; v[k].w *= inv;
            orow[i] = v[k];
        }
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = cuda_kernel(SOFTMAX, "softmax_rows")

    def forward(self, x):
        rows, cols = x.shape
        if not x.is_cuda or cols % 4 or cols > 4 * 4 * 1024:
            return torch.softmax(x, dim=1)
        x = x.contiguous()
        out = torch.empty_like(x)
        self.softmax((rows,), (1024,), out, x, cols)
        return out
