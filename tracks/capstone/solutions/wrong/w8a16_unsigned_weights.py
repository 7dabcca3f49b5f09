# The int8 weights widened as unsigned bytes (the sign lost, as when unpacking packed weights with the wrong
# type): -1 reads as 255. Every negative weight is wrong.
# expect: w8a16_gemm_score=0
# status: incorrect
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        weight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8)
        scale = (torch.rand(out_features) * 0.5 + 0.75) * (3.0 / in_features) ** 0.5 / 127
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.scale = nn.Parameter(scale.half(), requires_grad=False)

    def forward(self, x):
        return F.linear(x, self.weight.view(torch.uint8).to(x.dtype) * self.scale[:, None])
