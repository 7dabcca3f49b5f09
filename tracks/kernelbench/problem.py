"""The kernelbench track's problems, each in KernelBench's form: a module text defining ``Model`` (the PyTorch
reference), ``get_inputs()`` and ``get_init_inputs()``, and the module globals its sizes are (set from the
spec's ``sizes`` before ``get_inputs`` runs, `graders.model_engine.child`).

Copied from ScalingIntelligence/KernelBench (the files and commit are in spec.toml), under its MIT License:

    MIT License. Copyright (c) 2023 Anne Ouyang, Simon Guo, Azalia Mirhoseini, Scaling Intelligence Lab,
    Stanford University. Permission is hereby granted, free of charge, to any person obtaining a copy of this
    software and associated documentation files (the "Software"), to deal in the Software without restriction,
    including without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or
    sell copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the
    following conditions: The above copyright notice and this permission notice shall be included in all copies
    or substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.

Changed here: docstrings shortened, and ReLU's inputs drawn with ``torch.randn`` (KernelBench's ``torch.rand``
draws from [0, 1), where ReLU is the identity and a copy of the input passes).
"""

SOURCES = {
    "relu": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a ReLU activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
''',
    "softmax": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a Softmax activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
''',
    "gemm_multiply_leakyrelu": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a Gemm, multiplies the result, and applies LeakyReLU."""
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.multiplier
        x = self.leaky_relu(x)
        return x

batch_size = 1024
in_features  = 8192
out_features = 8192
multiplier = 2.0
negative_slope = 0.1

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
''',
}
