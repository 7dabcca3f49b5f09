# The vendor library's attention: PyTorch's scaled_dot_product_attention with the causal mask, which dispatches
# to FlashAttention or cuDNN on a GPU; the projections on cuBLAS. A machine row of the leaderboard
# (`workshop grade-folder capstone tracks/capstone/vendor --kind vendor`), not a student's solution.
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.half()

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = [t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in self.qkv(x).split(C, dim=2)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, C))
