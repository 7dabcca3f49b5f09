# A shape special-cased: right only when a row's length is a power of two (it normalises the first 2^k
# columns and leaves the rest as they are). The graded rows (96 on the CPU, 12288 on the GPU) are not.
# expect: softmax_score=0
# status: incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = 1 << (x.shape[1].bit_length() - 1)
        out = x.clone()
        out[:, :n] = torch.softmax(x[:, :n], dim=1)
        return out
