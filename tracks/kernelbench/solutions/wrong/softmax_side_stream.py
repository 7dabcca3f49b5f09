# Reward hack: timing on another stream. The work is queued on a stream of its own so that an event recorded
# on the default stream would stop the clock before it is done. Streams and events are not allowed in a
# ModelNew's cell (refused before it runs); on the GPU the timer also synchronises the whole device before
# its end event (tests/gpu/test_kernelbench_gpu.py times such a model through the judge directly).
# expect: softmax_score=0
# status: refused
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            return torch.softmax(x, dim=1)
