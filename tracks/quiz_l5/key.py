"""Lecture 5's answer key: never released, never in the student kit or a sandbox (graders/quiz_engine)."""
import math

REGISTERS, THREADS, BLOCKS, WARPS = 65536, 2048, 32, 64
SHARED_KIB, RESERVED_KIB = 228, 1


def _occupancy(g: dict) -> float:
    blocks = min(REGISTERS // (g["regs"] * g["t"]), THREADS // g["t"], BLOCKS)
    return 100 * blocks * g["t"] / 32 / WARPS


KEY = {
    "regtile_reuse": lambda g: g["tm"] * g["tn"] / (g["tm"] + g["tn"]),
    "occupancy": _occupancy,
    "smem_blocks": lambda g: min(SHARED_KIB // (g["s"] + RESERVED_KIB), BLOCKS),
    "bank_conflict": lambda g: max(1, 16 * math.gcd(g["s"], 32) // 32),
    "float4_loads": lambda g: g["bm"] * g["bk"] // (4 * g["t"]),
    "transposed_a": "b",
    "float4_alignment": 3,
    "warptiling": "b",
    "biggest_step": "c",
}
