# Gate and up swapped: the stacked weights' halves read in the wrong order, so the SiLU gates the up projection.
# expect: swiglu_mlp_score=0
# status: incorrect
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        gate = nn.Linear(d_model, d_hidden, bias=False)
        up = nn.Linear(d_model, d_hidden, bias=False)
        self.down = nn.Linear(d_hidden, d_model, bias=False)
        self.gate_up = nn.Parameter(torch.cat([gate.weight, up.weight]).detach(), requires_grad=False)
        self.d_hidden = d_hidden
        self.half()

    def forward(self, x):
        up, gate = F.linear(x, self.gate_up).split(self.d_hidden, dim=-1)
        return self.down(F.silu(gate) * up)
