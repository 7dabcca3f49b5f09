# The GEMM with its epilogue fused: each program computes a BLOCK_M x BLOCK_N tile of x @ W^T with tl.dot
# (TF32 on the tensor cores, fp32 accumulation: within KernelBench's 1e-2), then adds the bias, multiplies
# and applies LeakyReLU before its one store. nn.Linear is built as the reference builds it, so the same
# seed gives the same weights. On the CPU (the tests' path) the same function in PyTorch.
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def gemm_epilogue_kernel(out_ptr, x_ptr, w_ptr, b_ptr, M, N, K, multiplier, slope,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptr + rows[:, None] * K + (k + ks)[None, :],
                    mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(w_ptr + cols[None, :] * K + (k + ks)[:, None],
                    mask=(cols[None, :] < N) & ((k + ks)[:, None] < K), other=0.0)
        acc += tl.dot(a, b)
    acc += tl.load(b_ptr + cols, mask=cols < N, other=0.0)[None, :]
    acc = acc * multiplier
    acc = tl.where(acc >= 0, acc, acc * slope)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        weight, bias = self.gemm.weight, self.gemm.bias
        if not x.is_cuda:
            return F.leaky_relu(F.linear(x, weight, bias) * self.multiplier, self.negative_slope)
        x = x.contiguous()
        M, K = x.shape
        N = weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
        gemm_epilogue_kernel[grid](out, x, weight, bias, M, N, K, self.multiplier, self.negative_slope,
                                   BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3)
        return out
