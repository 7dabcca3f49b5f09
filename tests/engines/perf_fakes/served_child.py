"""A handler a session's child serves again and again (graders.sandbox.session): it counts the requests its
process has answered."""
from __future__ import annotations

import os
import time

SERVED = 0


def handle(request: dict) -> dict:
    global SERVED
    SERVED += 1
    if request.get("sleep_s"):
        time.sleep(request["sleep_s"])
    if request.get("exit"):
        os._exit(request["exit"])
    if request.get("print"):
        print("x" * request["print"], flush=True)
    return {"served": SERVED, "fit": request.get("fit", True), "pad": request.get("pad", "")}


def reusable(answer: dict) -> bool:
    return answer["fit"]
