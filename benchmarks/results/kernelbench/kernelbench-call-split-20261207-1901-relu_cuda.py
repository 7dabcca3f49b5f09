import torch
import torch.nn as nn
from graders.model_engine.cuda_kernels import cuda_kernel

RELU = r"""
extern "C" __global__ void relu(float* out, const float* x, int n) {
    int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* out4 = reinterpret_cast<float4*>(out);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x4[i];
        v.x = v.x > 0.0f ? v.x : 0.0f;
        v.y = v.y > 0.0f ? v.y : 0.0f;
        v.z = v.z > 0.0f ? v.z : 0.0f;
        v.w = v.w > 0.0f ? v.w : 0.0f;
        out4[i] = v;
    }
    int tail = 4 * n4 + i;
    if (i < n - 4 * n4) out[tail] = x[tail] > 0.0f ? x[tail] : 0.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = cuda_kernel(RELU, "relu")

    def forward(self, x):
        if not x.is_cuda:
            return torch.clamp_min(x, 0.0)
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        self.relu((max(1, (n // 4 + 255) // 256),), (256,), out, x, n)
        return out
