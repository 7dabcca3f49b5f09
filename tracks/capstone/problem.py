"""The capstone's problems, each in KernelBench's form (`graders.model_engine`): a module text defining ``Model``
(the PyTorch reference), ``get_inputs()`` and ``get_init_inputs()``, and the module globals its sizes are (set from
the spec's ``sizes`` before ``get_inputs`` runs). Half precision throughout, at the shapes a served model runs:

- ``attention_block``: a transformer's causal multi-head self-attention: the QKV projection, softmax(QK^T/sqrt(d))V
  with the causal mask, the output projection (a prefill's batch of sequences);
- ``w8a16_gemm``: a linear layer with int8 weights and a per-output-channel scale (weight-only quantization) at
  a batched decode step's few tokens, where reading the weights is the whole cost;
- ``swiglu_mlp``: a transformer's SwiGLU feed-forward layer, down(silu(gate(x)) * up(x)), over a prefill's tokens.
"""

SOURCES = {
    "attention_block": '''
import math

import torch
import torch.nn as nn

class Model(nn.Module):
    """Causal multi-head self-attention: QKV projection, softmax(QK^T / sqrt(d)) V under the causal mask, output
    projection. fp16 weights and activations; the softmax in fp32."""
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
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = torch.softmax(scores.float(), dim=-1).to(x.dtype) @ v
        return self.out(y.transpose(1, 2).reshape(B, T, C))

batch_size = 8
seq_len = 2048
d_model = 2048
n_heads = 16

def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model, dtype=torch.float16)]

def get_init_inputs():
    return [d_model, n_heads]
''',
    "w8a16_gemm": '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """y = x W^T with W stored as int8 and one fp16 scale per output channel (weight-only quantization):
    dequantize, then the fp16 GEMM."""
    def __init__(self, in_features, out_features):
        super().__init__()
        weight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8)
        scale = (torch.rand(out_features) * 0.5 + 0.75) * (3.0 / in_features) ** 0.5 / 127
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.scale = nn.Parameter(scale.half(), requires_grad=False)

    def forward(self, x):
        return F.linear(x, self.weight.to(x.dtype) * self.scale[:, None])

batch_size = 64
in_features = 4096
out_features = 14336

def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=torch.float16)]

def get_init_inputs():
    return [in_features, out_features]
''',
    "swiglu_mlp": '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """A transformer's SwiGLU feed-forward layer, down(silu(gate(x)) * up(x)), in fp16."""
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.gate = nn.Linear(d_model, d_hidden, bias=False)
        self.up = nn.Linear(d_model, d_hidden, bias=False)
        self.down = nn.Linear(d_hidden, d_model, bias=False)
        self.half()

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))

tokens = 4096
d_model = 4096
d_hidden = 14336

def get_inputs():
    return [torch.randn(tokens, d_model, dtype=torch.float16)]

def get_init_inputs():
    return [d_model, d_hidden]
''',
}
