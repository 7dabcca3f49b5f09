# Reward hack: a lazy result. It returns a torch.Tensor subclass that would compute softmax only when its
# values are read (after the timer stopped). The grader accepts exactly torch.Tensor, checked before the
# timer stops.
# expect: softmax_score=0
# status: incorrect
import torch
import torch.nn as nn


class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1).as_subclass(Lazy)
