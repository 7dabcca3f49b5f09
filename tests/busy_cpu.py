"""A synthetic load for the tests of a busy worker: processes that keep one CPU busy, and work run on that CPU."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def busy_cpu(count: int) -> Iterator[int]:
    """``count`` processes spinning on one CPU (the last this process may use), each in a session of its own: the
    scheduler shares a CPU between sessions first, so each takes a share as a grading child does. Yields the CPU;
    the processes are killed on leaving."""
    cpu = max(os.sched_getaffinity(0))
    spin = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin], start_new_session=True) for _ in range(count)]
    try:
        time.sleep(0.5)   # each has pinned itself
        yield cpu
    finally:
        for process in busy:
            process.kill()
            process.wait()


def on_cpu(cpu: int, work: Callable[[], T]) -> T:
    """``work()`` in a thread that runs on ``cpu`` only, as do the processes it starts; its value, or what it raised."""
    outcome: dict = {}

    def run() -> None:
        os.sched_setaffinity(0, {cpu})   # this thread's: what the processes it starts inherit
        try:
            outcome["value"] = work()
        except BaseException as exc:   # noqa: BLE001 (re-raised in the caller's thread)
            outcome["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
