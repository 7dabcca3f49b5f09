"""One submission's grading child: a sandboxed process that grades request after request of one submission.

Starting a grading child costs seconds (a sandbox, Python, torch, a CUDA context); a submission of ten
kernels paid it ten times. Inside ``with ChildSession():`` in a thread, `graders.sandbox.run.run_child`
sends the requests of a reusable handler (``reusable=True``, one without a ``wrapper``) to one child started
by ``python -m graders.sandbox.child --serve``, which answers them one by one, a line of JSON each, on its
private answer pipe. Each request keeps everything a fresh child has: the same sandbox and caps, its own
wall-clock limit, its own capped stdout, stderr (`graders.sandbox.capped_output.Pipes`) and answer.

A fresh child starts for the next request when the last one timed out (the child is killed with its
sandbox), died, answered too much or said it cannot serve again (``again``: after a CUDA error, for one), and
when a request asks for other caps or another environment. Nothing outlives the session: `close` (its
``with`` block's end) kills the child. A session serves one submission, so only that submission's own kernels
ever share a process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from graders.sandbox import capped_output
from graders.sandbox.run import ChildResult, UsageFile, _kill_group, child_argv, child_result, start_child

_local = threading.local()
EXIT_WAIT_S = 10.0   # for a child that said it serves no more to exit by itself


def current() -> ChildSession | None:
    """The session this thread grades in, or None."""
    return getattr(_local, "session", None)


class _Child:
    """A serving child: its process, its pipes and the caps it was started with."""

    def __init__(self, key: tuple, gpu: bool, memory_bytes: int | None, env: dict[str, str] | None):
        read_fd, write_fd = os.pipe()
        self.usage = UsageFile()
        try:
            argv = child_argv([sys.executable, "-m", "graders.sandbox.child", "--serve", str(write_fd)],
                              gpu=gpu, memory_bytes=memory_bytes, env=env, usage=self.usage)
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            self.usage.close()
            raise
        self.key = key
        self.proc = start_child(argv, write_fd, self.usage)
        self.pipes = capped_output.Pipes(self.proc, read_fd)

    def kill(self) -> None:
        _kill_group(self.proc)
        self.pipes.close()
        self.proc.wait()
        self.usage.close()


class ChildSession:
    """The grading child of one submission's requests in this thread (see the module's docstring)."""

    def __init__(self):
        self._child: _Child | None = None
        self._outer: ChildSession | None = None
        self.started = 0    # children started, for the grading's record

    def __enter__(self) -> ChildSession:
        self._outer, _local.session = current(), self
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        _local.session = self._outer

    def close(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child = None

    def run(self, handler: str, request: dict, *, timeout_s: float, memory_bytes: int | None = None,
            gpu: bool = False, env: dict[str, str] | None = None) -> ChildResult:
        """`graders.sandbox.run.run_child`'s result for ``handler`` on ``request``, answered by the session's
        child (started here when there is none fit to answer)."""
        key = (gpu, memory_bytes, tuple(sorted((env or {}).items())))
        start = time.monotonic()
        if self._child is not None and (self._child.key != key or self._child.proc.poll() is not None):
            self.close()
        if self._child is None:
            self._child = _Child(key, gpu, memory_bytes, env)
            self.started += 1
        child = self._child
        before = child.usage.read()   # this request's share of the child's usage: `UsageFile.since`
        pipes = child.pipes
        pipes.reset()
        pipes.send(json.dumps({"handler": handler, "request": request}).encode() + b"\n", then_close=False)
        deadline = start + timeout_s
        try:
            pipes.pump(deadline, lambda: b"\n" in pipes.answer or pipes.over)
        except BaseException:
            self.close()
            raise
        answered = b"\n" in pipes.answer and not pipes.over
        timed_out = not answered and not pipes.over and time.monotonic() >= deadline
        used = child.usage.since(before)
        if not answered:    # killed at its limit, died, or answered too much: the next request starts afresh
            child.kill()
            self._child = None
            got = pipes.exchange(timed_out)
            return child_result(got, None if timed_out else child.proc.returncode, timeout_s,
                                time.monotonic() - start, used)
        line, _, _ = bytes(pipes.answer).partition(b"\n")
        try:
            message = json.loads(line)
            answer, again = message["answer"], message["again"] is True
        except (ValueError, KeyError, TypeError):
            answer, again = None, False
        if not again:
            self._retire(child)
        raw = json.dumps(answer).encode() if answer is not None else b"{"   # garbled: reported as such
        got = capped_output.Exchange(pipes.stdout, pipes.stderr, raw, False, False)
        return child_result(got, None, timeout_s, time.monotonic() - start, used)

    def _retire(self, child: _Child) -> None:
        """The child serves no more: let it exit (it does so by itself), and kill what is left of it."""
        try:
            child.proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        child.kill()
        self._child = None
