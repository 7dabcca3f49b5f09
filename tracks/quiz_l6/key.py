"""Lecture 6's answer key: never released, never in the student kit or a sandbox (graders/quiz_engine)."""
BYTES = {"fp16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "fp32": 4}
SHAPES = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16), "m16n8k32": (16, 8, 32)}
LARGEST = {"fp16": 65504.0, "bf16": 3.3895313892515355e38, "fp8 e4m3": 448.0, "fp8 e5m2": 57344.0}


def _fragment_registers(g: dict) -> int:
    m, n, k = SHAPES[g["shape"]]
    elements = {"A": m * k, "B": k * n, "C": m * n}[g["operand"]]
    return elements * BYTES[g["dtype"]] // (32 * 4)


KEY = {
    "mma_flops": lambda g: 2 * g["m"] * g["n"] * g["k"],
    "mma_count": lambda g: (g["bm"] // 16) * (g["bn"] // 8) * (g["k"] // 16),
    "fragment_registers": _fragment_registers,
    "ldmatrix": "b",
    "swizzle_bank": lambda g: ((g["c"] ^ (g["r"] % 8)) * 16 // 4) % 32,
    "bf16": "b",
    "largest_value": lambda g: LARGEST[g["fmt"]],
    "tf32": "a",
    "leading_dimension": 10,
}
