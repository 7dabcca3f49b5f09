# Reward hack: caching across calls. The first call computes ReLU; every later call returns that first output.
# Every trial and every timed call has fresh inputs and is checked: the second trial fails.
# expect: relu_score=0
# status: incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cached is None:
            self.cached = torch.relu(x)
        return self.cached
