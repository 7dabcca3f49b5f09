"""What a grading child sends back, read with every stream capped: student code decides how much it writes, the
grader decides how much of it is kept.

`communicate` stands in for `subprocess.Popen.communicate` in `graders.sandbox.run.run_child`, and `Pipes` serves a
child that answers several requests (`graders.sandbox.session`). One selector loop writes the request to the
child's stdin and reads its stdout, its stderr and its private answer pipe side by side, so the child never blocks
on a full pipe:

- of stdout and of stderr, only the last `TAIL_BYTES` are kept (`Tail`); everything before is read, counted and
  dropped;
- of the answer, at most `ANSWER_BYTES`: one byte more and the pipe is closed (the child's next write to it
  fails) and the answer is reported as too large;
- at the deadline, the child is killed, whatever it is still writing; what it writes while it dies is read for
  at most `GRACE_S` more.

`CappedText` caps text the grader itself collects from student-influenced sources (a hidden test's printed report),
and `shorten` an exception's text.
"""
from __future__ import annotations

import io
import os
import selectors
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

TAIL_BYTES = 4096          # the end of a grading child's stdout, and of its stderr, that is kept
ANSWER_BYTES = 1 << 20     # a grading child's answer (JSON) at most
GRACE_S = 5.0              # reading after the child was killed at its deadline
CHUNK = 1 << 16


@dataclass
class Tail:
    """The last ``cap`` bytes written to a stream, and how many bytes came before them."""

    cap: int = TAIL_BYTES
    total: int = 0
    _kept: bytearray = field(default_factory=bytearray, repr=False)

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._kept += chunk
        if len(self._kept) > 2 * self.cap:
            del self._kept[:-self.cap]

    @property
    def data(self) -> bytes:
        return bytes(self._kept[-self.cap:])

    @property
    def dropped(self) -> int:
        return self.total - min(len(self._kept), self.cap)

    def text(self, name: str) -> str:
        """The kept bytes as text, after a line saying how many were dropped, if any."""
        text = self.data.decode(errors="replace")
        if not self.dropped:
            return text
        return (f"[{self.dropped} bytes dropped: the grader keeps the last {self.cap} bytes of a grading "
                f"child's {name}]\n{text}")


@dataclass
class Exchange:
    """What came back from one child, or from one request to a child that serves several (`Pipes`)."""

    stdout: Tail
    stderr: Tail
    answer: bytes
    answer_over_cap: bool     # the answer pipe carried more than ``ANSWER_BYTES``: ``answer`` is incomplete
    timed_out: bool           # the child was killed at its deadline


class Pipes:
    """A child's stdin, stdout, stderr and private answer pipe, served by one selector loop (`pump`): what is
    queued for stdin (`send`) is written as the child reads it; stdout and stderr are read into tails (`Tail`) and the
    answer pipe into ``answer``, at most `ANSWER_BYTES` of it (one byte more and that pipe is closed). `reset`
    starts a new exchange with the same child: fresh tails and an empty answer."""

    def __init__(self, proc: subprocess.Popen, answer_fd: int):
        self.proc, self.answer_fd = proc, answer_fd
        self.stdin = proc.stdin.fileno()
        os.set_blocking(self.stdin, False)
        self.selector = selectors.DefaultSelector()
        self.open_fds = {proc.stdout.fileno(), proc.stderr.fileno(), answer_fd, self.stdin}
        for fd in self.open_fds - {self.stdin}:
            self.selector.register(fd, selectors.EVENT_READ)
        self.pending, self.close_stdin = memoryview(b""), False
        self.reset()

    def reset(self) -> None:
        self.stdout, self.stderr = Tail(), Tail()
        self.answer, self.over = bytearray(), False

    def send(self, data: bytes, *, then_close: bool) -> None:
        """Queue ``data`` for the child's stdin; ``then_close``: close stdin once it is written."""
        self.pending, self.close_stdin = memoryview(data), then_close
        if self.stdin in self.open_fds:
            self.selector.register(self.stdin, selectors.EVENT_WRITE)

    @property
    def readers_open(self) -> bool:
        return bool(self.open_fds - {self.stdin})

    def _close(self, fd: int) -> None:
        if fd not in self.open_fds:
            return
        if fd in self.selector.get_map():
            self.selector.unregister(fd)
        self.open_fds.discard(fd)
        if fd == self.answer_fd:
            os.close(fd)
        elif fd == self.stdin:
            self.proc.stdin.close()

    def pump(self, until: float, done: Callable[[], bool]) -> None:
        """Serve the pipes until ``done()``, every reader is closed, or the monotonic clock reaches ``until``."""
        tails = {self.proc.stdout.fileno(): self.stdout, self.proc.stderr.fileno(): self.stderr}
        while self.readers_open and not done() and (left := until - time.monotonic()) > 0:
            for key, _ in self.selector.select(left):
                fd = key.fd
                if fd == self.stdin:
                    self._write()
                    continue
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    self._close(fd)
                elif fd == self.answer_fd:
                    self.answer.extend(chunk)
                    if len(self.answer) > ANSWER_BYTES:
                        self.over = True
                        del self.answer[ANSWER_BYTES:]
                        self._close(fd)
                else:
                    tails[fd].feed(chunk)

    def _write(self) -> None:
        try:
            self.pending = self.pending[os.write(self.stdin, self.pending[:CHUNK]):]
        except BlockingIOError:
            return
        except BrokenPipeError:      # the child stopped reading: the rest of the request is moot
            self.pending = self.pending[:0]
        if not self.pending:
            if self.close_stdin:
                self._close(self.stdin)
            else:
                self.selector.unregister(self.stdin)

    def exchange(self, timed_out: bool) -> Exchange:
        return Exchange(self.stdout, self.stderr, bytes(self.answer), self.over, timed_out)

    def close(self) -> None:
        for fd in list(self.open_fds):
            self._close(fd)
        self.selector.close()
        self.proc.stdout.close()
        self.proc.stderr.close()


def communicate(proc: subprocess.Popen, request: bytes, answer_fd: int, timeout_s: float,
                kill: Callable[[], None]) -> Exchange:
    """Send ``request`` on ``proc``'s stdin and read its stdout, stderr and the answer pipe ``answer_fd`` (which
    this closes) until the child has exited with every pipe closed, or until ``timeout_s``, when ``kill`` is
    called (as it is when reading fails). Returns once ``proc`` has been waited for."""
    deadline = time.monotonic() + timeout_s
    pipes = Pipes(proc, answer_fd)
    pipes.send(request, then_close=True)
    timed_out = False
    try:
        pipes.pump(deadline, lambda: False)
        if pipes.readers_open:
            timed_out = True
            kill()
            pipes.pump(time.monotonic() + GRACE_S, lambda: False)
        else:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:    # its pipes are closed, but it runs on
                timed_out = True
                kill()
    except BaseException:
        kill()
        raise
    finally:
        pipes.close()
        proc.wait()
    return pipes.exchange(timed_out)


class CappedText(io.TextIOBase):
    """A text buffer that keeps the first ``cap`` characters written to it (`kept`) and counts the rest
    (``dropped``); whoever shows it says what was dropped."""

    def __init__(self, cap: int):
        self.cap = cap
        self.dropped = 0
        self._parts: list[str] = []
        self._size = 0

    def write(self, text: str) -> int:
        written = len(text)
        room = self.cap - self._size
        if len(text) > room:
            self.dropped += len(text) - max(room, 0)
            text = text[:max(room, 0)]
        if text:
            self._parts.append(text)
            self._size += len(text)
        return written

    def kept(self) -> str:
        return "".join(self._parts)


def shorten(text: str, cap: int, what: str) -> str:
    """``text``, or its first ``cap`` characters and a note saying how many were dropped and why."""
    if len(text) <= cap:
        return text
    return f"{text[:cap]} [{len(text) - cap} more characters dropped: {what} is capped at {cap}]"
