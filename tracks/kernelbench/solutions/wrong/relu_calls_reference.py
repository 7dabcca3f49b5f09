# Reward hack: calling the reference Model. The problem's names are not in a ModelNew's namespace: the cell
# is refused before it runs (Model is neither defined, imported nor an allowed builtin).
# expect: relu_score=0
# status: refused
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.reference = Model()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.reference(x)
