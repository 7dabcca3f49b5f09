"""Child handlers for the CPU tests of the perf sandbox (run by graders.sandbox.run.run_child)."""
from __future__ import annotations

import atexit
import os
import time

from graders.cuda_engine.timing import run_until_stable


def handle(request: dict) -> dict:
    mode = request["mode"]
    if mode == "hang":
        while True:
            time.sleep(1)
    if mode == "crash":
        os.abort()
    if mode == "raise":
        raise RuntimeError("the handler broke")
    if mode == "abandon":   # gives up on work that would hold the interpreter's teardown (a kernel that never ends)
        atexit.register(time.sleep, 600)
        return {"abandoned": True, "exit_at_once": True}
    if mode == "wrapped":   # run under a wrapper command: what it set, and a line on stdout
        print("a line from inside the wrapper")
        return {"wrapped": os.environ.get("WRAPPED")}

    def sample(_subject: str) -> float:   # stands in for the CUDA-event timer on a machine without a GPU
        start = time.perf_counter()
        time.sleep(request["sleep_s"])
        return time.perf_counter() - start

    stats = run_until_stable(sample, ["sleep"], budget_s=3.0, rse_target=0.05, min_samples=5)
    return {"median_s": stats["sleep"].median_s, "samples": stats["sleep"].samples}
