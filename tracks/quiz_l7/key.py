"""Lecture 7's answer key: never released, never in the student kit or a sandbox (graders/quiz_engine)."""
KEY = {
    "racecheck": "b",
    "initcheck": "c",
    "skipped_barrier": 4,
    "launch_blocking": "a",
    "core_dump": "c",
    "missing_person": "c",
    "dram_percent": lambda g: 100 * (g["r"] + g["w"]) * 1e6 / (g["t"] * 1e-6) / (g["p"] * 1e12),
    "achieved_intensity": lambda g: (2 * g["ffma"] + g["fadd"] + g["fmul"]) / g["d"],
    "long_scoreboard": "a",
    "speed_of_light": "a",
}
