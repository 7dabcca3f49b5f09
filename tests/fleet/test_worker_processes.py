"""Workers started for the fleet tests never outlive the run that started them: when its process dies, even by
SIGKILL (no teardown, no atexit), the worker and its Celery pool process die with it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from workshop.fleet.processes import descendants

START = """
import os, sys, time
from pathlib import Path
from workshop.fleet.local import Worker
worker = Worker("orphan@fleet-test", Path(sys.argv[1]), dict(os.environ)).start()
print(worker.wait_ready().proc.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_worker_dies_with_the_process_that_started_it(tmp_path, redis):
    env = {**os.environ, "WORKSHOP_BROKER_URL": redis.url}
    parent = subprocess.Popen([sys.executable, "-c", START, str(tmp_path / "worker.log")], env=env,
                              stdout=subprocess.PIPE, text=True)
    tree: list[int] = []
    try:
        worker = int(parent.stdout.readline())
        tree += [worker, *descendants(worker)]
        assert len(tree) >= 2, "the worker and its pool process"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 20
        while any(map(alive, tree)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in tree if alive(pid)], (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        parent.kill()
        for pid in filter(alive, tree):
            os.kill(pid, signal.SIGKILL)
