"""Run untrusted work in a fresh child process with a wall-clock limit and a memory limit.

The parent sends a JSON request on the child's stdin and reads the child's JSON answer from a private pipe
(not stdout, which student code can print to). A child that runs past its limit is killed with its whole
process group; one that dies or answers nothing is reported as crashed. Nothing raised in the child reaches
the parent as an exception: every outcome is a `ChildResult`.

A child module exposes ``handle(request: dict) -> dict`` and is started through ``python -m graders.child``.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "timeout", "crashed"]


@dataclass
class ChildResult:
    status: Status
    answer: dict = field(default_factory=dict)
    message: str = ""
    stderr: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _limit_memory(memory_bytes: int | None):
    def apply() -> None:
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    return apply


def run_child(
    handler: str,
    request: dict,
    *,
    timeout_s: float,
    memory_bytes: int | None = None,
    env: dict[str, str] | None = None,
) -> ChildResult:
    """Run ``handler`` (a module path with a ``handle`` function) on ``request`` in a fresh process.

    ``memory_bytes`` caps the child's address space; leave it None for children that use CUDA, whose
    driver reserves far more virtual memory than it uses (their GPU memory is capped inside the child).
    """
    read_fd, write_fd = os.pipe()
    child_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "graders.child", handler, str(write_fd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(write_fd,),
        env=child_env,
        start_new_session=True,
        preexec_fn=_limit_memory(memory_bytes),
    )
    os.close(write_fd)
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        os.close(read_fd)
        return ChildResult(
            "timeout",
            message=f"stopped after {timeout_s:g} s: it did not finish (an endless loop or a deadlock?)",
            stderr=_tail(err),
            seconds=time.monotonic() - start,
        )
    with os.fdopen(read_fd, "rb") as channel:
        raw = channel.read()
    seconds = time.monotonic() - start
    stderr = _tail(err)
    if proc.returncode != 0 or not raw:
        return ChildResult("crashed", message=_crash_message(proc.returncode, stderr), stderr=stderr,
                           seconds=seconds)
    try:
        answer = json.loads(raw)
    except json.JSONDecodeError:
        return ChildResult("crashed", message="the child's answer was garbled", stderr=stderr, seconds=seconds)
    return ChildResult("ok", answer=answer, stderr=stderr, seconds=seconds)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _crash_message(returncode: int, stderr: str) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"the grading process was killed by {name}" + (
            " (out of memory?)" if name in ("SIGKILL", "SIGSEGV") else "")
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no error message"
    return f"the grading process exited with status {returncode}: {last}"


def _tail(data: bytes, limit: int = 4000) -> str:
    text = data.decode(errors="replace")
    return text[-limit:]
