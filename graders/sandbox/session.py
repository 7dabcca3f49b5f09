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

A notebook's own checks (a student's kernel, in the student's Jupyter kernel: nothing there scores) run in
`process_session`: one session for the life of the process, for requests answered by forks, so that each check
is a fork of a child that started once rather than a new sandbox and Python.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
import time

from graders.sandbox import capped_output
from graders.sandbox.run import (ChildResult, UsageFile, _kill_group, child_argv, child_result, sandbox_enabled,
                                 start_child)

_local = threading.local()
EXIT_WAIT_S = 10.0   # for a child that said it serves no more to exit by itself
SANDBOX_SCRATCH = ("/tmp", "/dev/shm")   # a sandbox's private writable folders, emptied after a forked request


def current(forked: bool = False) -> ChildSession | None:
    """The session this thread grades in, or None; ``forked``: for a request answered by a fork."""
    session = getattr(_local, "session", None)
    return session if session is not None and session.serves(forked) else None


class _Child:
    """A serving child: its process, its pipes and the caps it was started with."""

    def __init__(self, key: tuple, gpu: bool, memory_bytes: int | None, env: dict[str, str] | None, forked: bool):
        read_fd, write_fd = os.pipe()
        self.usage = UsageFile()
        mode = ["--fork-serve", str(write_fd), *(SANDBOX_SCRATCH if sandbox_enabled() else ())] if forked else \
            ["--serve", str(write_fd)]
        try:
            argv = child_argv([sys.executable, "-m", "graders.sandbox.child", *mode],
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
    """The grading child of one submission's requests in this thread (see the module's docstring).
    ``forked_only``: it serves only requests answered by forks (`SessionPool`)."""

    def __init__(self, forked_only: bool = False):
        self._child: _Child | None = None
        self._outer: ChildSession | None = None
        self.forked_only = forked_only
        self.started = 0    # children started, for the grading's record

    def __enter__(self) -> ChildSession:
        self._outer, _local.session = getattr(_local, "session", None), self
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        _local.session = self._outer

    def close(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child = None

    def serves(self, forked: bool) -> bool:
        return forked or not self.forked_only

    def run(self, handler: str, request: dict, *, timeout_s: float, memory_bytes: int | None = None,
            gpu: bool = False, env: dict[str, str] | None = None, forked: bool = False) -> ChildResult:
        """`graders.sandbox.run.run_child`'s result for ``handler`` on ``request``, answered by the session's
        child (started here when there is none fit to answer); ``forked``: by a fork of it
        (`graders.sandbox.child`'s ``--fork-serve``)."""
        key = (gpu, memory_bytes, tuple(sorted((env or {}).items())), forked)
        start = time.monotonic()
        if self._child is not None and (self._child.key != key or self._child.proc.poll() is not None):
            self.close()
        if self._child is None:
            self._child = _Child(key, gpu, memory_bytes, env, forked)
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
        raw, returncode, over, again = _reply(line)
        if not again:
            self._retire(child)
        got = capped_output.Exchange(pipes.stdout, pipes.stderr, raw, over, False)
        return child_result(got, returncode, timeout_s, time.monotonic() - start, used)

    def _retire(self, child: _Child) -> None:
        """The child serves no more: let it exit (it does so by itself), and kill what is left of it."""
        try:
            child.proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        child.kill()
        self._child = None


def _reply(line: bytes) -> tuple[bytes, int | None, bool, bool]:
    """(the answer's JSON text, the exit status of the fork that answered (None: the serving process itself
    answered), whether the answer was over its cap, whether the child serves again) of a serving child's line."""
    try:
        message = json.loads(line)
        again = message["again"] is True
        if "raw" in message:   # ``--fork-serve``
            return message["raw"].encode(), int(message["exit"]), message["over"] is True, again
        return (json.dumps(message["answer"]).encode() if message["answer"] is not None else b"{"), None, False, \
            again
    except (ValueError, KeyError, TypeError, AttributeError):
        return b"{", None, False, False   # garbled: reported as such


class SessionPool:
    """Sessions for threads that grade one submission side by side (`graders.autograde`'s untimed tests): each
    `lease` lends the calling thread a session no other thread holds, for requests answered by forks only
    (``forked_only``); the pool's end closes them all."""

    def __init__(self):
        self._free: list[ChildSession] = []
        self._all: list[ChildSession] = []
        self._lock = threading.Lock()

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            for held in self._all:
                held.close()

    @contextlib.contextmanager
    def lease(self):
        with self._lock:
            if not self._free:
                self._all.append(ChildSession(forked_only=True))
                self._free.append(self._all[-1])
            held = self._free.pop()
        outer, _local.session = getattr(_local, "session", None), held
        try:
            yield held
        finally:
            _local.session = outer
            with self._lock:
                self._free.append(held)

    @property
    def started(self) -> int:
        return sum(held.started for held in self._all)


_process_session: ChildSession | None = None
_process_lock = threading.Lock()


@contextlib.contextmanager
def process_session():
    """Within it, requests answered by forks (``forked``) go to one session kept for the life of this process
    (closed at its exit), one call at a time; inside a session already (the trusted grader's), that one. For a
    notebook's own checks, where every request is the student's own kernel."""
    global _process_session
    if current(forked=True) is not None:
        yield
        return
    with _process_lock:
        if _process_session is None:
            _process_session = ChildSession(forked_only=True)
            atexit.register(_process_session.close)
        outer, _local.session = getattr(_local, "session", None), _process_session
        try:
            yield
        finally:
            _local.session = outer
