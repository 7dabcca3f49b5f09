"""What a grading child sends back, read with every stream capped: student code decides how much it writes, the
grader decides how much of it is kept.

`communicate` stands in for `subprocess.Popen.communicate` in `graders.sandbox.run.run_child`. One selector loop
writes the request to the child's stdin and reads its stdout, its stderr and its private answer pipe side by
side, so the child never blocks on a full pipe:

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
    """What came back from one child."""

    stdout: Tail
    stderr: Tail
    answer: bytes
    answer_over_cap: bool     # the answer pipe carried more than ``ANSWER_BYTES``: ``answer`` is incomplete
    timed_out: bool           # the child was killed at its deadline


def communicate(proc: subprocess.Popen, request: bytes, answer_fd: int, timeout_s: float,
                kill: Callable[[], None]) -> Exchange:
    """Send ``request`` on ``proc``'s stdin and read its stdout, stderr and the answer pipe ``answer_fd`` (which
    this closes) until the child has exited with every pipe closed, or until ``timeout_s``, when ``kill`` is
    called (as it is when reading fails). Returns once ``proc`` has been waited for."""
    deadline = time.monotonic() + timeout_s
    stdout, stderr = Tail(), Tail()
    tails = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
    stdin = proc.stdin.fileno()
    answer = bytearray()
    over = timed_out = False
    pending = memoryview(request)
    os.set_blocking(stdin, False)
    selector = selectors.DefaultSelector()
    for fd in (*tails, answer_fd):
        selector.register(fd, selectors.EVENT_READ)
    selector.register(stdin, selectors.EVENT_WRITE)
    open_fds = {*tails, answer_fd, stdin}

    def close(fd: int) -> None:
        selector.unregister(fd)
        open_fds.discard(fd)
        if fd == answer_fd:
            os.close(fd)
        elif fd == stdin:
            proc.stdin.close()

    def pump(until: float) -> None:
        nonlocal pending, over
        while open_fds - {stdin} and (left := until - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                fd = key.fd
                if fd == stdin:
                    try:
                        pending = pending[os.write(fd, pending[:CHUNK]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:      # the child stopped reading: the rest of the request is moot
                        pending = pending[:0]
                    if not pending:
                        close(fd)
                    continue
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    close(fd)
                elif fd == answer_fd:
                    answer.extend(chunk)
                    if len(answer) > ANSWER_BYTES:
                        over = True
                        del answer[ANSWER_BYTES:]
                        close(fd)
                else:
                    tails[fd].feed(chunk)

    try:
        pump(deadline)
        if open_fds - {stdin}:
            timed_out = True
            kill()
            pump(time.monotonic() + GRACE_S)
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
        for fd in list(open_fds):
            close(fd)
        selector.close()
        proc.stdout.close()
        proc.stderr.close()
        proc.wait()
    return Exchange(stdout, stderr, bytes(answer), over, timed_out)


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
