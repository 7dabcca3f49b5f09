"""Lecture 4's answer key: never released, never in the student kit or a sandbox (graders/quiz_engine)."""
KEY = {
    "gemm_gflop": lambda g: 2 * g["m"] * g["n"] * g["k"] / 1e9,
    "naive_gb": lambda g: 2 * 4 * g["m"] * g["n"] * g["k"] / 1e9,
    "tiled_gb": lambda g: 2 * 4 * g["n"] ** 3 / g["t"] / 1e9,
    "tile_intensity": lambda g: 2 * g["bm"] * g["bn"] * g["bk"] / (4 * g["bk"] * (g["bm"] + g["bn"])),
    "naive_a_access": "c",
    "coalescing_fix": "a",
    "race": 6,
    "blocktile_loads": lambda g: (g["tm"] + 1) / g["tm"],
}
