"""The serving track's answer key (`graders.quiz_engine`): prefill against decode for one bf16 linear layer
(problem.py's ``QUESTIONS``)."""


def _flops(t, g):
    return 2 * t * g["n"] * g["k"]


def _bytes(t, g):
    return 2 * (g["n"] * g["k"] + t * g["k"] + t * g["n"])


def _floor_us(t, g):
    return max(_bytes(t, g) / (g["b"] * 1e12), _flops(t, g) / (g["p"] * 1e12)) * 1e6


def _crossover(g):
    """T where 2 T N K / (2 (N K + T K + T N)) = P / B: T = R N K / (N K - R (K + N)), R the ridge point."""
    ridge = g["p"] / g["b"]
    return ridge * g["n"] * g["k"] / (g["n"] * g["k"] - ridge * (g["k"] + g["n"]))


KEY = {
    "decode_intensity": lambda g: _flops(1, g) / _bytes(1, g),
    "prefill_intensity": lambda g: _flops(4096, g) / _bytes(4096, g),
    "crossover_tokens": _crossover,
    "decode_floor": lambda g: _floor_us(1, g),
    "prefill_floor": lambda g: _floor_us(4096, g),
    # 16 tokens: intensity about 16 FLOP/byte, far under the H200's ridge (989 / 4.8 = 206): still W's bytes
    "batching": "b",
    # memory-bound: only fewer bytes help
    "decode_lever": "c",
}
