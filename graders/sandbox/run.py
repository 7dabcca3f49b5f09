"""Run untrusted code in a bubblewrap sandbox; run a grading handler in a fresh sandboxed child.

`sandbox_argv` gives the argv that runs a command confined (`Confinement` says how): its own user
namespace (uid 65534, all capabilities dropped, no nested user namespaces), pid, network (loopback only),
IPC, UTS and cgroup namespaces, a new session, a fresh session keyring, and death with its parent. The
filesystem is an allowlist (`graders.sandbox.visible`): an empty read-only root with the system's programs and
libraries, a few files of ``/etc``, the Python installation, the grader's code and its tracks' grader files bound
read-only, a fresh ``/proc`` (read-only except the sandbox's own processes' entries), a minimal ``/dev`` (plus the
NVIDIA device nodes, ``/sys``, the driver's libraries and the tools a child runs under for a GPU sandbox), and a
private tmpfs ``/tmp`` (the default working directory and ``HOME``) and ``/dev/shm``. Nothing else of the host:
no course, checkout, home, exchange, backup, mount, service socket or secret. The environment is an allowlist
without secrets (`graders.sandbox.confine.sandbox_environment`).

When the caller is root, the sandbox's uid is root's on the host (bubblewrap maps it so): files only root
may read are readable inside when they are bound, which is why nothing is bound that the list does not name.

A supervisor process (`graders.sandbox.confine`) starts bubblewrap and caps the sandbox as a whole: processes and
memory through a cgroup of its own where the cgroup hierarchy is writable, CPU time through that cgroup's
accounting plus RLIMIT_CPU per process; its docstring gives the fallbacks.

``WORKSHOP_SANDBOX=off`` (trusted local use only) runs commands through the same supervisor and caps but
without bubblewrap, in the caller's full environment. ``WORKSHOP_BWRAP`` names the bwrap binary (default:
``bwrap`` on PATH).

`run_child` runs a handler module in a fresh sandboxed child: the parent sends a JSON request on the
child's stdin and reads the child's JSON answer from a private pipe (not stdout, which student code can
print to). A child that runs past its wall-clock limit is killed with its whole sandbox; one that dies or
answers nothing is reported as crashed. Nothing raised in the child reaches the parent as an exception:
every outcome is a `ChildResult`, with what the machine gave the child (its sandbox's CPU seconds and seconds
waiting for a CPU, from the supervisor's `UsageFile`), from which `graders.sandbox.starvation` tells a kernel's
timeout from a busy worker's. A child module exposes ``handle(request: dict) -> dict`` and is started
through ``python -m graders.sandbox.child``. Fresh children started inside ``with watching(watch):`` are killed by
``watch.abandon()`` (`ChildWatch`): for checks whose outcome will not be read.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from graders import settings
from graders.sandbox import capped_output, confine
from graders.sandbox.visible import COURSE_PRIVATE, resolved, visible

Status = Literal["ok", "timeout", "crashed"]

REPO_ROOT = PACKAGE_ROOT = settings.PACKAGE_ROOT   # the checkout, or site-packages
SANDBOX_UID = 65534
NAMESPACES = ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
              "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
              "--die-with-parent", "--new-session"]

HOW_TO = ("Install bubblewrap 0.8 or newer (Debian/Ubuntu: `apt-get install bubblewrap`) or point "
          "WORKSHOP_BWRAP at a bwrap binary, and allow user namespaces: on Debian "
          "`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 23.10 and later AppArmor restricts them "
          "(`sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for bwrap); in a "
          "container, run it with user namespaces allowed. For trusted local use only, WORKSHOP_SANDBOX=off "
          "runs student code without the sandbox.")


class SandboxUnavailable(RuntimeError):
    """Student code cannot be sandboxed here; the message says why and how to fix it."""

    def __init__(self, reason: str):
        super().__init__(f"cannot sandbox student code: {reason}. {HOW_TO}")


@dataclass(frozen=True)
class Confinement:
    """How one sandbox is confined. Caps of None are not applied."""

    gpu: bool = False                      # bind the NVIDIA device nodes
    memory_bytes: int | None = None        # whole sandbox (cgroup), and per process (see graders.sandbox.confine)
    cpu_seconds: int | None = None         # whole sandbox (cgroup accounting) and RLIMIT_CPU per process
    max_processes: int | None = 512        # tasks (processes and threads) of the whole sandbox
    writable: tuple[Path, ...] = ()        # existing directories bound read-write at the same path
    hide: tuple[Path, ...] = ()            # more directories (e.g. the course) or files to hide
    workdir: Path | None = None            # working directory inside (visible there); default /tmp
    tmp_bytes: int = 1 << 30               # size of the private /tmp and of /dev/shm, each


def sandbox_enabled() -> bool:
    """False only when ``WORKSHOP_SANDBOX=off``."""
    return settings.sandbox_enabled()


def bwrap_path() -> str:
    """The bwrap binary: ``WORKSHOP_BWRAP``, else ``bwrap`` on PATH; `SandboxUnavailable` if there is none."""
    path = settings.bwrap_binary()
    if not path:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SandboxUnavailable(f"no executable bwrap at {path}")
    return path


@functools.lru_cache(maxsize=None)
def _check_bwrap(bwrap: str) -> None:
    """Run an empty sandbox once per binary (failures are not cached)."""
    try:
        done = subprocess.run(
            [bwrap, *_bwrap_args(Confinement(), {}), "--", sys.executable, "-I", "-S", "-c", ""],
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"{bwrap} does not run: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise SandboxUnavailable(f"{bwrap} cannot create the sandbox ({why})")


def sandbox_argv(command: list[str], confinement: Confinement = Confinement(), *,
                 env: Mapping[str, str] | None = None, usage_fd: int | None = None) -> list[str]:
    """The argv that runs ``command`` confined; ``env`` is set inside on top of the allowlisted environment.
    ``usage_fd``: where the supervisor reports the sandbox's usage (`UsageFile`), a descriptor the caller passes.

    Raises `SandboxUnavailable` when the sandbox cannot be built here (unless ``WORKSHOP_SANDBOX=off``).
    """
    c = confinement
    options = []
    if c.memory_bytes:
        options += ["--memory", str(c.memory_bytes), "--memory-rlimit", "data" if c.gpu else "as"]
    if c.cpu_seconds:
        options += ["--cpu", str(c.cpu_seconds)]
    if c.max_processes:
        options += ["--processes", str(c.max_processes)]
    for name, value in (env or {}).items():
        options += ["--setenv", name, value]
    if usage_fd is not None:
        options += ["--usage-fd", str(usage_fd)]
    options += ["--parent", str(os.getpid())]   # the sandbox ends with this process
    supervisor = [sys.executable, "-I", "-S", confine.__file__, *options]
    if not sandbox_enabled():
        return [*supervisor, "--plain", "--", *command]
    bwrap = bwrap_path()
    _check_bwrap(bwrap)
    # the command's own program is visible however it is installed (a tool such as compute-sanitizer wraps python)
    tools = (command[0],) if os.path.isabs(command[0]) else ()
    return [*supervisor, "--bwrap", "--", bwrap, *_bwrap_args(c, dict(env or {}), tools), "--", *command]


def _proc_covers() -> list[str]:
    """Read-only binds over /proc's global entries (sys, irq, sysrq-trigger, ...): the sandbox's uid is root's
    on the host when the caller is root, and sysctls and such files trust that uid. The per-process entries
    stay writable (the CUDA driver fails on an all read-only /proc); they are the sandbox's own processes."""
    covers = []
    for entry in sorted(os.listdir("/proc")):
        path = f"/proc/{entry}"
        if not entry.isdigit() and entry not in ("self", "thread-self") and not os.path.islink(path):
            covers += ["--ro-bind-try", path, path]
    return covers


def _sqlite_gradebook() -> str | None:
    """The gradebook's file when ``WORKSHOP_GRADEBOOK_URL`` names an SQLite file outside the course."""
    url = settings.gradebook_url() if "WORKSHOP_GRADEBOOK_URL" in os.environ else ""
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None


def _courses(c: Confinement, env: dict[str, str]) -> list[Path]:
    """Folders that must stay unseen even when a Python path leads into them: this checkout (when the package
    runs from one), the nbgrader course directory the caller runs in, ``Confinement.hide``, ``WORKSHOP_ROOT``
    and an SQLite gradebook's folder."""
    repo = REPO_ROOT if any((REPO_ROOT / n).exists() for n in (*COURSE_PRIVATE, "pyproject.toml")) else None
    course_here = Path.cwd() if (Path.cwd() / "nbgrader_config.py").is_file() else None
    gradebook = _sqlite_gradebook()
    candidates = [repo, course_here, *c.hide, os.environ.get("WORKSHOP_ROOT"), env.get("WORKSHOP_ROOT"),
                  os.path.dirname(gradebook) if gradebook else None]
    return [Path(p) for p in candidates if p]


def _bwrap_args(c: Confinement, env: dict[str, str], tools: tuple[str, ...] = ()) -> list[str]:
    view = visible(gpu=c.gpu, courses=_courses(c, env), env=env, tools=tools)
    args = [*NAMESPACES, "--dev", "/dev"]
    if c.gpu:
        for device in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", device, device]
    args += ["--size", str(c.tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--proc", "/proc", *_proc_covers(), "--size", str(c.tmp_bytes), "--tmpfs", "/tmp", *view.args()]
    for w in c.writable:
        r = resolved(w)
        if r is None or not r.is_dir():
            raise ValueError(f"writable path {w} is not an existing directory")
        args += ["--bind", str(r), str(r)]
    args += ["--remount-ro", "/", "--chdir", str(c.workdir or "/tmp")]
    return args


# --- the child runner --------------------------------------------------------------------------------------

@dataclass
class ChildResult:
    status: Status
    answer: dict = field(default_factory=dict)
    message: str = ""
    stderr: str = ""
    seconds: float = 0.0
    stdout: str = ""     # the end of what the child (or its ``wrapper``) printed
    cpu_s: float | None = None      # CPU time its sandbox had (user and system, all its processes); None: unknown
    waited_s: float | None = None   # time its sandbox was ready to run but waited for a CPU; None: unknown
    observed_s: float | None = None   # the time since the child started that these two cover (`UsageFile`)
    rerun: str = ""      # why this is a second run (`graders.sandbox.starvation`); '' for a first

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class ChildWatch:
    """The fresh children started inside `watching` it, in any thread: `abandon` kills those running (each one's
    `run_child` then reports it crashed) and every one started after it at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.abandoned = False

    def started(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running.add(proc)
            abandoned = self.abandoned
        if abandoned:
            _kill_group(proc)

    def ended(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(proc)

    def abandon(self) -> None:
        with self._lock:
            self.abandoned, running = True, list(self._running)
        for proc in running:
            if proc.poll() is None:   # not one reaped already, whose process group id another may hold by now
                _kill_group(proc)


_watch: contextvars.ContextVar[ChildWatch | None] = contextvars.ContextVar("child_watch", default=None)


@contextlib.contextmanager
def watching(watch: ChildWatch):
    """Fresh children that `run_child` starts within it (in this thread) are ``watch``'s."""
    token = _watch.set(watch)
    try:
        yield watch
    finally:
        _watch.reset(token)


def run_child(
    handler: str,
    request: dict,
    *,
    timeout_s: float,
    memory_bytes: int | None = None,
    gpu: bool = False,
    env: dict[str, str] | None = None,
    wrapper: tuple[str, ...] = (),
    reusable: bool = False,
    forked: bool = False,
    writable: tuple[Path, ...] = (),
) -> ChildResult:
    """Run ``handler`` (a module path with a ``handle`` function) on ``request`` in a fresh sandbox.

    ``wrapper`` is a command the child runs under, inside the sandbox (compute-sanitizer and its options);
    what it prints comes back in ``ChildResult.stdout``.

    ``memory_bytes`` caps the sandbox's memory (and, without ``gpu``, each process's address space; CUDA
    reserves far more address space than it uses); None: `settings.child_memory_bytes` (every child is capped).
    ``gpu`` gives the child the GPU. ``env`` is set in the child on top of the sandbox's allowlisted environment
    (``PYTHONPATH`` directories become visible).
    Raises `SandboxUnavailable` when there is no sandbox (see ``WORKSHOP_SANDBOX``).

    ``reusable`` (a handler that may serve several requests, see `graders.sandbox.child`): inside a
    `graders.sandbox.session.ChildSession` of this thread, the session's child answers, with the same caps and
    limit; elsewhere a fresh child, as always. ``forked`` (a handler whose requests may each run student code
    that must not reach the next): in a session, a fork of the session's child answers, a process as fresh as
    a new child's but without its start-up (`graders.sandbox.child`'s ``--fork-serve``). ``writable``: existing
    directories the child may write (a fresh child always: never a session's, whose requests run student code).

    What comes back is capped (`graders.sandbox.capped_output`): the last 4 KiB of stdout and of stderr (a line
    before them says how many bytes were dropped), an answer of at most 1 MiB (a larger one is a crash that
    says so); a child still writing at its deadline is killed all the same.
    """
    from graders.sandbox import session   # it builds on this module
    serving = session.current(forked) if (reusable or forked) and not wrapper and not writable else None
    if serving is not None:
        return serving.run(handler, request, timeout_s=timeout_s, memory_bytes=memory_bytes, gpu=gpu, env=env,
                           forked=forked)
    read_fd, write_fd = os.pipe()
    usage = UsageFile()
    try:
        argv = child_argv([*wrapper, sys.executable, "-m", "graders.sandbox.child", handler, str(write_fd)],
                          gpu=gpu, memory_bytes=memory_bytes, env=env, usage=usage, writable=writable)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        usage.close()
        raise
    start = time.monotonic()
    watch = _watch.get()
    with usage:
        proc = start_child(argv, write_fd, usage)
        if watch is not None:
            watch.started(proc)
        try:
            # every stream is capped: the child decides how much it writes, not how much of it is kept
            got = capped_output.communicate(proc, json.dumps(request).encode(), read_fd, timeout_s,
                                            kill=lambda: _kill_group(proc))
        finally:
            if watch is not None:
                watch.ended(proc)
        return child_result(got, proc.returncode, timeout_s, time.monotonic() - start, usage.read())


class UsageFile:
    """A file (in memory) where a child's supervisor rewrites what its sandbox got from the machine
    (`graders.sandbox.confine.UsageReport`, every `confine.USAGE_POLL_S`): `read` gives its last report."""

    def __init__(self):
        self.fd = os.memfd_create("sandbox-usage")   # close-on-exec: only the child it is passed to gets it

    def read(self) -> dict[str, float | None]:
        """``cpu_s``, ``waited_s`` and ``observed_s`` of the last report (see `ChildResult`); None: unknown, or no
        report yet. The supervisor reports every `confine.USAGE_POLL_S`, so a child stopped at its deadline was
        last observed up to that long before (longer when the supervisor itself waited for a CPU)."""
        try:
            report = json.loads(os.pread(self.fd, confine.USAGE_BYTES, 0) or b"{}")
        except (OSError, ValueError):   # read while it was rewritten
            report = {}
        return {key: report.get(key) for key in ("cpu_s", "waited_s", "observed_s")}

    def since(self, before: dict[str, float | None]) -> dict[str, float | None]:
        """What `read` gives now less ``before`` (an earlier `read`; None there: no report yet, nothing used):
        one request's share of a serving child."""
        now = self.read()
        return {key: None if now[key] is None else now[key] - (before[key] or 0.0) for key in now}

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> UsageFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def child_argv(command: list[str], *, gpu: bool, memory_bytes: int | None, env: dict[str, str] | None,
               usage: UsageFile | None = None, writable: tuple[Path, ...] = ()) -> list[str]:
    """The sandboxed argv of a grading child's ``command`` (see `run_child`), its usage reported to ``usage``."""
    extra = {"PYTHONUNBUFFERED": "1", **(env or {})}
    # the child's entry point is this package: importable in the child however it was installed
    pythonpath = extra.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    extra["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(PACKAGE_ROOT)) if p)
    memory_bytes = settings.child_memory_bytes() if memory_bytes is None else memory_bytes
    confinement = Confinement(gpu=gpu, memory_bytes=memory_bytes, writable=tuple(writable))
    return sandbox_argv(command, confinement, env=extra, usage_fd=usage.fd if usage else None)


def start_child(argv: list[str], answer_fd: int, usage: UsageFile | None = None) -> subprocess.Popen:
    """Start a child with piped stdio and the write end ``answer_fd`` of its answer pipe (closed here), and the
    file its supervisor reports its usage to."""
    try:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(answer_fd, *([usage.fd] if usage else [])), start_new_session=True)
    finally:
        os.close(answer_fd)


def child_result(got: capped_output.Exchange, returncode: int | None, timeout_s: float,
                 seconds: float, usage: dict[str, float | None] | None = None) -> ChildResult:
    """The `ChildResult` of one exchange with a child whose exit status is ``returncode`` (None: still running);
    ``usage``: what its sandbox got from the machine meanwhile (`UsageFile`)."""
    stderr, stdout = got.stderr.text("stderr"), got.stdout.text("stdout")
    seen = {"stderr": stderr, "seconds": seconds, **(usage or {})}
    if got.timed_out:
        confine.remove_stale_cgroups()
        return ChildResult(
            "timeout", message=f"stopped after {timeout_s:g} s: it did not finish (an endless loop or a deadlock?)",
            **seen)
    if got.answer_over_cap:
        return ChildResult("crashed", message=f"the answer was larger than {capped_output.ANSWER_BYTES} bytes "
                           "(the cap on a grading child's answer)", stdout=stdout, **seen)
    raw = got.answer
    if (returncode is not None and returncode != 0) or not raw:
        return ChildResult("crashed", message=_crash_message(returncode or 0, stderr), stdout=stdout, **seen)
    try:
        answer = json.loads(raw)
    except json.JSONDecodeError:
        return ChildResult("crashed", message="the child's answer was garbled", stdout=stdout, **seen)
    return ChildResult("ok", answer=answer, stdout=stdout, **seen)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the supervisor; bubblewrap's --die-with-parent takes the whole sandbox with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _crash_message(returncode: int, stderr: str) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        caps = [line for line in stderr.splitlines() if line.startswith("[sandbox] ")]
        if caps:   # the supervisor says which cap stopped it
            return f"the grading process was killed by {name}: {caps[-1].removeprefix('[sandbox] ')}"
        return f"the grading process was killed by {name}" + (
            " (out of memory?)" if name in ("SIGKILL", "SIGSEGV") else "")
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no error message"
    return f"the grading process exited with status {returncode}: {last}"

