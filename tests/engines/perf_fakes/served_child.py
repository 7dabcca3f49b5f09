"""A handler a session's child serves again and again (graders.sandbox.session): it counts the requests its
process has answered, and does what a hostile request might (leaves files and processes behind)."""
from __future__ import annotations

import importlib
import os
import subprocess
import time
from pathlib import Path

SERVED = 0
IMPORTED_BY = os.urandom(8).hex()   # the same in a process and in its forks


def handle(request: dict) -> dict:
    global SERVED
    SERVED += 1
    if request.get("sleep_s"):
        time.sleep(request["sleep_s"])
    if request.get("exit"):
        os._exit(request["exit"])
    if request.get("print"):
        print("x" * request["print"], flush=True)
    if request.get("leave"):    # a file in each scratch folder, and a process that outlives the request
        for folder in ("/tmp", "/dev/shm"):
            Path(folder, request["leave"]).write_text("left behind")
        subprocess.Popen(["sleep", "600", request["leave"]], start_new_session=True)
    if request.get("plant"):   # a module in the working directory, which `python -m` puts first on sys.path
        Path(request["plant"] + ".py").write_text("PLANTED = True\n")
    imported = None
    if request.get("import"):
        try:
            imported = importlib.import_module(request["import"]).PLANTED
        except ImportError:
            imported = False
    return {"imported": imported, "served": SERVED, "fit": request.get("fit", True), "pad": request.get("pad", ""), "pid": os.getpid(),
            "imported_by": IMPORTED_BY, "scratch": sorted(os.listdir("/tmp") + os.listdir("/dev/shm"))}


def reusable(answer: dict) -> bool:
    return answer["fit"]
