# The dequantization fused into the GEMM: each program loads int8 weight tiles, widens them to fp16 in registers
# (exact: |w| <= 127) for tl.dot with fp32 accumulation, and multiplies by the column's scale once, after the K
# loop. The weights are read once, as int8, where the reference writes and reads an fp16 copy of them. At a
# decode step's few tokens one BLOCK_M covers them all. On the CPU (the tests' path) the reference's steps.
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def w8a16_gemm_kernel(out_ptr, x_ptr, w_ptr, scale_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptr + rows[:, None] * K + (k + ks)[None, :],
                    mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(w_ptr + cols[None, :] * K + (k + ks)[:, None],
                    mask=(cols[None, :] < N) & ((k + ks)[:, None] < K), other=0)
        acc += tl.dot(a, b.to(tl.float16))
    acc = acc * tl.load(scale_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.float16),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        weight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8)
        scale = (torch.rand(out_features) * 0.5 + 0.75) * (3.0 / in_features) ** 0.5 / 127
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.scale = nn.Parameter(scale.half(), requires_grad=False)

    def forward(self, x):
        if not x.is_cuda:
            return F.linear(x, self.weight.to(x.dtype) * self.scale[:, None])
        x = x.contiguous()
        M, K = x.shape
        N = self.weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float16)
        block_m = max(16, min(64, triton.next_power_of_2(M)))
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, 64))
        w8a16_gemm_kernel[grid](out, x, self.weight, self.scale, M, N, K, BLOCK_M=block_m, BLOCK_N=64,
                                BLOCK_K=128, num_warps=4, num_stages=4)
        return out
