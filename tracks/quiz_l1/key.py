"""Lecture 1's answer key: never released, never in the student kit or a sandbox (graders/quiz_engine)."""
BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp8": 1}

KEY = {
    "add_regime": "b",
    "add_intensity": lambda g: 1 / (3 * BYTES[g["dtype"]]),
    "ridge": lambda g: g["p"] / g["b"],
    "matmul_intensity": lambda g: 2 * g["n"] ** 3 / (3 * 4 * g["n"] ** 2),
    "attainable": lambda g: min(g["p"], g["i"] * g["b"]),
    "add_floor": lambda g: 3 * 4 * g["n"] / (g["b"] * 1e12) * 1e6,
    "tiny_ops": "c",
    "timing": 5,
}
