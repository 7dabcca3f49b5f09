"""Entry point of a sandboxed child: ``python -m graders.sandbox.child MODULE FD``, ``--serve FD`` or
``--fork-serve FD [DIR...]``.

Reads the JSON request from stdin, calls ``MODULE.handle(request)`` and writes its JSON answer to file
descriptor FD, a pipe only the parent reads. An exception in the handler is an answer too
(``{"error": ...}``), so the parent can tell "the student's code failed" from "the child died".

With ``--serve`` (`graders.sandbox.session`) it answers request after request, each a line of JSON
``{"handler": MODULE, "request": ...}`` on stdin, each answer a line ``{"answer": ..., "again": bool}`` on FD.
``again`` is false, and the child exits, after a handler's error and after any answer its module's
``reusable(answer)`` refuses (a module without ``reusable`` serves one request): a CUDA error, say, leaves
the process unfit for the next one.

An answer whose handler set ``"exit_at_once": true`` (the key is not passed on) is the process's last: it exits as
soon as the answer is written, without the interpreter's teardown, which could wait forever on work the handler
gave up on (a CUDA kernel that never ends, `graders.cuda_engine.child`).

With ``--fork-serve`` it never runs a request itself: it imports the handler's module once (and the modules its
``FORK_PRELOAD`` names, what every request imports), then answers each request in a fork of itself, so every request
starts from the same untouched process (what one request's code changes in memory is gone for the next) without
paying for the imports again. It answers ``{"raw": TEXT, "exit": STATUS, "over": bool, "again": true}``: the fork's
answer as written (at most `capped_output.ANSWER_BYTES`; ``over`` when it wrote more), and the fork's exit status
(negative: the signal that killed it). Before answering it kills every process the request left behind (this process
is their subreaper) and removes what it added under the folders DIR (the sandbox's private ``/tmp`` and
``/dev/shm``; not what is mounted there), so nothing a request leaves reaches the next; where that fails, it serves
no more. Nobody in the sandbox may trace or read this process's memory (it is not dumpable, and the sandbox has no
capabilities).
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import shutil
import signal
import sys
import traceback
from pathlib import Path

from graders.sandbox.capped_output import ANSWER_BYTES

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


def answer(module_name: str, request: dict) -> tuple[dict, bool, bool]:
    """(``MODULE.handle(request)`` or the error it raised, whether this process may serve another request, whether
    it must exit at once: its handler's ``exit_at_once``)."""
    module = importlib.import_module(module_name)
    try:
        found = module.handle(request)
    except Exception as exc:  # the handler's own failure is reported, not raised
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}, False, False
    if isinstance(found, dict) and found.pop("exit_at_once", False):
        return found, False, True
    reusable = getattr(module, "reusable", None)
    return found, bool(reusable and reusable(found)), False


def exit_at_once() -> None:
    """End this process now, its answer written, without the interpreter's teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def serve(channel) -> None:
    for line in sys.stdin:
        message = json.loads(line)
        found, again, leave = answer(message["handler"], message["request"])
        channel.write(json.dumps({"answer": found, "again": again}) + "\n")
        channel.flush()
        if leave:
            exit_at_once()
        if not again:
            return


def fork_serve(channel, wiped: list[Path]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for option, value in ((PR_SET_DUMPABLE, 0), (PR_SET_CHILD_SUBREAPER, 1)):
        if libc.prctl(option, value, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() not in wiped]   # ``-m`` put the cwd there
    kept = set(_entries(wiped))
    for line in sys.stdin:
        message = json.loads(line)
        module = importlib.import_module(message["handler"])   # once: every fork starts with it imported
        for name in getattr(module, "FORK_PRELOAD", ()):   # and with what its requests all import
            importlib.import_module(name)
        raw, status, over = _forked(message["handler"], message["request"], channel.fileno())
        _kill_leftovers()
        try:
            _remove_new(wiped, kept)
            again = True
        except OSError:   # what is left might reach the next request: a fresh child serves it
            again = False
        channel.write(json.dumps({"raw": raw.decode("utf-8", "replace"), "exit": status, "over": over,
                                  "again": again}) + "\n")
        channel.flush()
        if not again:
            return


def _forked(module_name: str, request: dict, channel_fd: int) -> tuple[bytes, int, bool]:
    """(the answer a fork of this process wrote for ``request``, its exit status, whether it wrote more than
    `ANSWER_BYTES`)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_fd)
            os.close(channel_fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            found, _, _ = answer(module_name, request)   # a fork ends with os._exit whatever it answers
            with os.fdopen(write_fd, "wb") as out:
                out.write(json.dumps(found).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    data, status, over = bytearray(), None, False
    try:
        while True:
            if select.select([read_fd], [], [], 0.05)[0]:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                data += chunk
                if len(data) > ANSWER_BYTES:
                    over = True
                    break
            elif status is None:
                done, raw_status = os.waitpid(pid, os.WNOHANG)
                if done:   # what it left holding the pipe open dies now
                    status = os.waitstatus_to_exitcode(raw_status)
                    _kill_leftovers()
    finally:
        os.close(read_fd)
    if status is None:   # it closed the pipe, and exits (or hangs: the parent's limit ends that)
        if over:
            os.kill(pid, signal.SIGKILL)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return (b"" if over else bytes(data)), status, over


def _kill_leftovers() -> None:
    """Kill and reap every child of this process: the forks and whatever they started (this process is their
    subreaper, so they are its children once their parents are gone)."""
    while children := _children():
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _children() -> list[int]:
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == me:
                found.append(int(entry))
    return found


def _entries(folders: list[Path]) -> list[str]:
    """Every path under ``folders``, parents first, not looking into what is mounted there (the sandbox's binds);
    raises where a folder cannot be read."""
    found = []
    for folder in folders:
        device = os.lstat(folder).st_dev
        with os.scandir(folder) as listing:
            entries = list(listing)
        for entry in entries:
            found.append(entry.path)
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_dev == device:
                found += _entries([Path(entry.path)])
    return found


def _remove_new(folders: list[Path], kept: set[str]) -> None:
    """Remove what a request added under ``folders``: every entry not in ``kept`` (those there at the start)."""
    for path in _entries(folders):
        if path in kept or not os.path.lexists(path):   # kept, or inside a folder removed before it
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=_writable_again)
        else:
            os.unlink(path)


def _writable_again(function, path: str, _exc) -> None:
    """`shutil.rmtree`'s retry for what a request made unreadable or unwritable (it owns it: chmod works)."""
    for folder in (os.path.dirname(path), path):
        if os.path.isdir(folder) and not os.path.islink(folder):
            os.chmod(folder, 0o700)
    function(path)


def main() -> None:
    if sys.argv[1] in ("--serve", "--fork-serve"):
        with os.fdopen(int(sys.argv[2]), "w") as channel:
            if sys.argv[1] == "--serve":
                serve(channel)
            else:
                fork_serve(channel, [Path(p) for p in sys.argv[3:]])
        return
    module_name, fd = sys.argv[1], int(sys.argv[2])
    channel = os.fdopen(fd, "w")
    found, _, leave = answer(module_name, json.loads(sys.stdin.read()))
    channel.write(json.dumps(found))
    channel.close()
    if leave:
        exit_at_once()


if __name__ == "__main__":
    main()
