# A wrong tolerance: the right function, its output rounded to steps of 0.05 ("close enough by eye"), outside
# the problem's atol = rtol = 1e-2.
# expect: gemm_multiply_leakyrelu_score=0
# status: incorrect
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = F.leaky_relu(self.gemm(x) * self.multiplier, self.negative_slope)
        return torch.round(y * 20) / 20
