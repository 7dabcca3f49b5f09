"""Lecture 2's answer key: never released, never in the student kit or a sandbox (graders/quiz_engine)."""
KEY = {
    "global_index": lambda g: g["block"] * g["dim"] + g["t"],
    "blocks": lambda g: -(-g["n"] // g["t"]),
    "warps": lambda g: -(-g["x"] * g["y"] // 32),
    "divergence": "b",
    "syncthreads": "b",
    "out_of_bounds": 3,
    "race": 8,
}
