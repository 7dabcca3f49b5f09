"""Run untrusted code in a bubblewrap sandbox; run a grading handler in a fresh sandboxed child.

`sandbox_argv` gives the argv that runs a command confined (`Confinement` says how): its own user
namespace (uid 65534, all capabilities dropped, no nested user namespaces), pid, network (loopback only),
IPC, UTS and cgroup namespaces, a new session, a fresh session keyring, and death with its parent. The
filesystem is the host's, read-only (``/proc`` too, except the sandbox's own processes' entries), with a
private tmpfs ``/tmp`` (the default working directory and ``HOME``) and ``/dev/shm``, and a minimal
``/dev`` (plus the NVIDIA device nodes for a GPU sandbox). Hidden behind empty read-only tmpfs: this
repository (the course directory: solutions, gradebook, submissions), the nbgrader course directory the
caller runs in, every ``Confinement.hide`` directory, ``WORKSHOP_ROOT``, an SQLite gradebook named by
``WORKSHOP_GRADEBOOK_URL``, the invoking user's home and runtime directories (Jupyter connection files),
and ``/run`` (services' unix sockets, which a read-only mount does not protect); ``/etc/shadow``,
``/etc/gshadow`` and the SSH host keys are unreadable. Re-exposed read-only inside those: the Python
installation (``sys.prefix``, ``sys.base_prefix``, ``sys.exec_prefix``), directories on ``sys.path`` and
``PYTHONPATH`` that are not a hidden root, do not contain one and are not a course's private folder
(`COURSE_PRIVATE`), the code package ``graders/``, and each track's grader files
(``tracks/*/spec.toml``, ``structure.toml``, ``problem.py``: `graders.tracks.GRADER_FILES`, file by file,
since the solutions sit beside them). The environment is an allowlist without secrets (`graders.sandbox.confine.sandbox_environment`).

When the caller is root, the sandbox's uid is root's on the host (bubblewrap maps it so): files only root
may read are readable inside unless hidden, which is why the home directory and the files above are.

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
every outcome is a `ChildResult`. A child module exposes ``handle(request: dict) -> dict`` and is started
through ``python -m graders.sandbox.child``.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from graders import settings
from graders.sandbox import confine
from graders.tracks import GRADER_FILES

Status = Literal["ok", "timeout", "crashed"]

REPO_ROOT = PACKAGE_ROOT = settings.PACKAGE_ROOT   # the checkout, or site-packages
CODE_PACKAGES = ("graders",)
# Folders and files of a course directory that never become visible, even when on PYTHONPATH.
COURSE_PRIVATE = ("tracks", "solutions", "source", "assignments", "submitted", "autograded", "release", "feedback",
                  "exchange", "gradebook.db", ".git")
MASKED_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_*key")
# Where services keep their unix sockets (PostgreSQL, Redis, dockerd...): a read-only mount does not stop a
# connect() to a socket file, so these folders are hidden whole.
RUNTIME_DIRS = ("/run", "/var/run")
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
            [bwrap, *NAMESPACES, "--ro-bind", "/", "/", "--dev", "/dev", "--remount-ro", "/dev",
             "--proc", "/proc", *_proc_covers(), "--size", "1048576", "--tmpfs", "/tmp", "--",
             shutil.which("true") or "/bin/true"],   # not sys.executable: a venv under /tmp is hidden here
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"{bwrap} does not run: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise SandboxUnavailable(f"{bwrap} cannot create the sandbox ({why})")


def sandbox_argv(command: list[str], confinement: Confinement = Confinement(), *,
                 env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that runs ``command`` confined; ``env`` is set inside on top of the allowlisted environment.

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
    options += ["--parent", str(os.getpid())]   # the sandbox ends with this process
    supervisor = [sys.executable, "-I", "-S", confine.__file__, *options]
    if not sandbox_enabled():
        return [*supervisor, "--plain", "--", *command]
    bwrap = bwrap_path()
    _check_bwrap(bwrap)
    return [*supervisor, "--bwrap", "--", bwrap, *_bwrap_args(c, dict(env or {})), "--", *command]


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


def _resolved(path) -> Path | None:
    try:
        return Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _sqlite_gradebook() -> str | None:
    """The gradebook's file when ``WORKSHOP_GRADEBOOK_URL`` names an SQLite file outside the course."""
    url = settings.gradebook_url() if "WORKSHOP_GRADEBOOK_URL" in os.environ else ""
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None


def _home() -> Path | None:
    try:
        return Path(os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def _bwrap_args(c: Confinement, env: dict[str, str]) -> list[str]:
    workshop_root = os.environ.get("WORKSHOP_ROOT") or env.get("WORKSHOP_ROOT")
    # the checkout this package runs from (not a site-packages directory, where it is installed normally)
    repo = REPO_ROOT if any((REPO_ROOT / n).exists() for n in (*COURSE_PRIVATE, "pyproject.toml")) else None
    # the nbgrader course directory the caller runs in (nbgrader itself, or a tool started from the course)
    course_here = Path.cwd() if (Path.cwd() / "nbgrader_config.py").is_file() else None
    courses = [r for r in (_resolved(p) for p in (repo, course_here, *c.hide, workshop_root) if p)
               if r and r.is_dir()]
    tmp = Path("/tmp")
    candidates = [*courses, *(_resolved(p) for p in c.hide), _home(), os.environ.get("XDG_RUNTIME_DIR"),
                  os.environ.get("JUPYTER_RUNTIME_DIR"), *RUNTIME_DIRS, _sqlite_gradebook()]
    hidden_dirs: list[Path] = []
    hidden_files: list[Path] = []
    for p in candidates:
        r = _resolved(p) if p else None
        if r is None or r == Path("/") or _within(r, tmp):
            continue
        (hidden_dirs if r.is_dir() else hidden_files).append(r)
    hidden_dirs = sorted({h for h in hidden_dirs if not any(o != h and _within(h, o) for o in hidden_dirs)})
    private = [course / name for course in courses for name in COURSE_PRIVATE]

    def covered(p: Path) -> bool:
        return any(_within(p, h) for h in [*hidden_dirs, tmp])

    def exposable(p: Path) -> bool:
        return (not any(_within(h, p) for h in hidden_dirs)
                and not any(_within(p, q) or _within(q, p) for q in private))

    python_paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]
    for pythonpath in (os.environ.get("PYTHONPATH", ""), env.get("PYTHONPATH", "")):
        python_paths += pythonpath.split(os.pathsep)
    exposed: list[Path] = []
    for entry in python_paths:
        if entry and os.path.isabs(entry):
            r = _resolved(entry)
            if r and covered(r) and exposable(r):
                exposed.append(r)
    if any(_within(REPO_ROOT, h) for h in [*hidden_dirs, tmp]):
        exposed += [REPO_ROOT / name for name in CODE_PACKAGES if (REPO_ROOT / name).is_dir()]
    exposed = sorted(set(exposed))
    exposed = [p for p in exposed if not any(o != p and _within(p, o) for o in exposed)]
    data_files = sorted({Path(f).resolve() for course in courses for name in GRADER_FILES
                         for f in glob.glob(str(course / "tracks" / "*" / name))})

    args = [*NAMESPACES, "--ro-bind", "/", "/", "--dev", "/dev"]
    if c.gpu:
        for device in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", device, device]
    args += ["--size", str(c.tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--proc", "/proc", *_proc_covers(), "--size", str(c.tmp_bytes), "--tmpfs", "/tmp"]
    for h in hidden_dirs:
        args += ["--size", "1048576", "--tmpfs", str(h)]
    for p in exposed:
        args += ["--ro-bind", str(p), str(p)]
    for f in data_files:
        if not any(_within(f, p) for p in exposed):
            args += ["--ro-bind", str(f), str(f)]
    for w in c.writable:
        r = _resolved(w)
        if r is None or not r.is_dir():
            raise ValueError(f"writable path {w} is not an existing directory")
        args += ["--bind", str(r), str(r)]
    for h in hidden_dirs:
        args += ["--remount-ro", str(h)]
    masked = [*hidden_files, *(Path(f) for pattern in MASKED_FILES for f in glob.glob(pattern))]
    for f in sorted(set(masked)):
        if not any(_within(f, h) for h in hidden_dirs):
            args += ["--ro-bind", "/dev/null", str(f)]
    args += ["--chdir", str(c.workdir or "/tmp")]
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

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_child(
    handler: str,
    request: dict,
    *,
    timeout_s: float,
    memory_bytes: int | None = None,
    gpu: bool = False,
    env: dict[str, str] | None = None,
    wrapper: tuple[str, ...] = (),
) -> ChildResult:
    """Run ``handler`` (a module path with a ``handle`` function) on ``request`` in a fresh sandbox.

    ``wrapper`` is a command the child runs under, inside the sandbox (compute-sanitizer and its options);
    what it prints comes back in ``ChildResult.stdout``.

    ``memory_bytes`` caps the sandbox's memory (and, without ``gpu``, each process's address space; CUDA
    reserves far more address space than it uses). ``gpu`` gives the child the GPU. ``env`` is set in the
    child on top of the sandbox's allowlisted environment (``PYTHONPATH`` directories become visible).
    Raises `SandboxUnavailable` when there is no sandbox (see ``WORKSHOP_SANDBOX``).
    """
    read_fd, write_fd = os.pipe()
    try:
        extra = {"PYTHONUNBUFFERED": "1", **(env or {})}
        # the child's entry point is this package: importable in the child however it was installed
        pythonpath = extra.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        extra["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(PACKAGE_ROOT)) if p)
        argv = sandbox_argv([*wrapper, sys.executable, "-m", "graders.sandbox.child", handler, str(write_fd)],
                            Confinement(gpu=gpu, memory_bytes=memory_bytes), env=extra)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(write_fd,),
        start_new_session=True,
    )
    os.close(write_fd)
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        os.close(read_fd)
        confine.remove_stale_cgroups()
        return ChildResult(
            "timeout",
            message=f"stopped after {timeout_s:g} s: it did not finish (an endless loop or a deadlock?)",
            stderr=_tail(err),
            seconds=time.monotonic() - start,
        )
    with os.fdopen(read_fd, "rb") as channel:
        raw = channel.read()
    seconds = time.monotonic() - start
    stderr, stdout = _tail(err), _tail(out)
    if proc.returncode != 0 or not raw:
        return ChildResult("crashed", message=_crash_message(proc.returncode, stderr), stderr=stderr,
                           seconds=seconds, stdout=stdout)
    try:
        answer = json.loads(raw)
    except json.JSONDecodeError:
        return ChildResult("crashed", message="the child's answer was garbled", stderr=stderr, seconds=seconds,
                           stdout=stdout)
    return ChildResult("ok", answer=answer, stderr=stderr, seconds=seconds, stdout=stdout)


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


def _tail(data: bytes, limit: int = 4000) -> str:
    text = data.decode(errors="replace")
    return text[-limit:]
