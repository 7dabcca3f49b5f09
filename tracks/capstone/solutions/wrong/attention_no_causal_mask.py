# The causal mask forgotten: every query attends to every key, later ones included (what an encoder does). The
# outputs differ from the first trial on.
# expect: attention_block_score=0
# status: incorrect
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.half()

    def forward(self, x):
        B, T, C = x.shape
        d = C // self.n_heads
        q, k, v = [t.view(B, T, self.n_heads, d).transpose(1, 2) for t in self.qkv(x).split(C, dim=2)]
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        y = torch.softmax(scores.float(), dim=-1).to(x.dtype) @ v
        return self.out(y.transpose(1, 2).reshape(B, T, C))
