"""The supervisor of one sandbox: caps, environment, signals and clean-up around a bubblewrap process.

`graders.sandbox.run.sandbox_argv` starts it as ``python -I -S confine.py OPTIONS -- ARGV`` (standard library
only: it imports nothing from the course). It caps the sandbox as a whole where it can, through a cgroup
of its own below its own cgroup (never above it, so the caller's limits keep applying; v2, else v1, per
controller, where the hierarchy is writable and the controller is delegated):

- processes: ``pids.max`` caps the tasks (processes and threads). Without a pids cgroup: RLIMIT_NPROC,
  which counts every process of the invoking user; as root, which the kernel exempts from RLIMIT_NPROC,
  the supervisor counts the tasks in the sandbox's pid namespace every `PROCESS_POLL_S` (running at
  real-time priority so that a fork bomb cannot starve it) and kills the sandbox once there are more than
  the cap; a burst of forks can overshoot until the next count.
- memory: the cgroup's memory limit (tmpfs files included); when it kills a process, the whole sandbox
  goes. Per process on top: RLIMIT_AS for CPU sandboxes (a MemoryError rather than a kill). GPU
  sandboxes get no address-space limit (CUDA reserves far more than it uses): without a memory cgroup
  they get RLIMIT_DATA per process instead.
- CPU time: RLIMIT_CPU per process (SIGXCPU), and the CPU time of all processes together read from the
  cgroup's accounting (v2 ``cpu.stat`` needs no controller); the sandbox is killed with SIGXCPU once the
  total passes the cap. Without any cgroup, only the per-process limit applies.

With ``--usage-fd FD`` it reports what the sandbox got from the machine (`UsageReport`): its CPU seconds (user and
system, all its processes: the cgroup's accounting, else its live processes' with their reaped children's, from
/proc) and its seconds waiting for a CPU (ready to run, every core busy: the cgroup's v2 CPU pressure, else the
machine's, /proc/pressure/cpu, since the sandbox started; unknown without pressure accounting), and the seconds
since it started that they cover. The caller reads them to tell a child the worker starved from one that ran out
its time (`graders.sandbox.starvation`).

It gives the sandbox an allowlisted environment (`sandbox_environment`) and a new session keyring,
starts ARGV (bwrap, or the command itself with ``--plain``) in its own process group, forwards SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the sandbox's main process, and when that process ends
kills whatever is left, removes the cgroup and exits with the same status (a signal as the same signal;
a cap that stopped the sandbox says so on stderr in a ``[sandbox]`` line). If the supervisor itself is
killed, bwrap's ``--die-with-parent`` takes the sandbox down and the next supervisor removes the cgroup
left behind (`remove_stale_cgroups`). The supervisor runs in a session of its own, so it watches the process
that started it (``--parent PID``) and stops the sandbox when that one is gone. ``WORKSHOP_SANDBOX_CGROUPS=off``
makes it use the fallbacks (for their tests).
"""
from __future__ import annotations

import json
import os
import re
import resource
import select
import signal
import sys
import time
from pathlib import Path

PREFIX = "workshop-sandbox-"
PROCESS_POLL_S = 0.05   # how often the processes are counted where no pids cgroup caps them
UNWATCHED_S = 10.0
PARENT_POLL_S = 0.5     # how often the supervisor looks for its parent where it cannot wait on a pidfd
USAGE_POLL_S = 0.5      # how often the sandbox's usage is rewritten (the caller may kill the supervisor at any time)
USAGE_BYTES = 128       # the usage report's fixed size: each write replaces the whole of the last
REFUSED = 125
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

# Inherited variables the sandbox may see (names, or prefixes ending in "_"); explicit --setenv pairs are
# added unfiltered.
ALLOWED = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "PYTHONUNBUFFERED", "LD_LIBRARY_PATH",
           "MPLBACKEND", "NBGRADER_EXECUTION", "LC_", "NUMBA_", "CUDA_", "NVIDIA_", "WORKSHOP_")
SECRET_NAME = re.compile(r"URL|URI|DSN|PASS|SECRET|TOKEN|KEY|CRED|AUTH|COOKIE|SESSION", re.I)
URL_VALUE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
FIXED = {"HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}


def sandbox_environment(environ: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """The allowlisted part of ``environ`` without anything that looks like a secret, plus ``extra``."""
    env = {}
    for name, value in environ.items():
        allowed = any(name.startswith(a) if a.endswith("_") else name == a for a in ALLOWED)
        if allowed and not SECRET_NAME.search(name) and not URL_VALUE.match(value):
            env[name] = value
    return env | FIXED | extra


# --- cgroups ---------------------------------------------------------------------------------------------

def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount root, mount point, super options) of the cgroup mounts."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((tail[0], fields[3], fields[4].replace("\\040", " "), set(tail[2].split(","))))
    return found


def _own_dir(mount_root: str, mount_point: str, path: str) -> Path | None:
    for rel in (path, os.path.relpath(path, mount_root) if path.startswith(mount_root) else None):
        if rel is not None:
            candidate = Path(mount_point) / rel.lstrip("/")
            if candidate.is_dir():
                return candidate
    return None


def cgroup_parents(controllers=("pids", "memory", "cpu")) -> dict[str, tuple[int, Path]]:
    """For each controller that can be used: (cgroup version, own cgroup dir to create the sandbox's under).

    Only the caller's own cgroup is used, never one above it, so its limits keep applying. ``cpu`` means
    CPU-time accounting (v2's cpu.stat, which needs no controller, or v1's cpuacct).
    """
    if os.environ.get("WORKSHOP_SANDBOX_CGROUPS") == "off":   # for tests of the fallbacks (runs with -I: no graders)
        return {}
    try:
        own = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in (names.split(",") if names else [""]):
                own[name] = path
    except (OSError, ValueError):
        return {}
    found: dict[str, tuple[int, Path]] = {}
    mounts = _mounts()
    v2 = next(((root, point) for kind, root, point, _ in mounts if kind == "cgroup2"), None)
    if v2 and "" in own:
        base = _own_dir(v2[0], v2[1], own[""])
        if base is not None and os.access(base, os.W_OK):
            enabled = _enable_v2(base, [c for c in controllers if c != "cpu"])
            for controller in controllers:
                if controller == "cpu" or controller in enabled:
                    found[controller] = (2, base)
    v1_names = {"pids": "pids", "memory": "memory", "cpu": "cpuacct"}
    for controller in controllers:
        if controller in found:
            continue
        name = v1_names[controller]
        for kind, root, point, options in mounts:
            if kind == "cgroup" and name in options and name in own:
                base = _own_dir(root, point, own[name])
                if base is not None and os.access(base, os.W_OK):
                    found[controller] = (1, base)
                    break
    return found


def _enable_v2(base: Path, wanted: list[str]) -> set[str]:
    """The controllers of ``wanted`` that children of ``base`` get, enabling them where the kernel lets us."""
    try:
        enabled = set((base / "cgroup.subtree_control").read_text().split())
        available = set((base / "cgroup.controllers").read_text().split())
    except OSError:
        return set()
    for controller in wanted:
        if controller not in enabled and controller in available:
            try:   # refused (EBUSY) where the cgroup has processes of its own and is not the root
                (base / "cgroup.subtree_control").write_text(f"+{controller}")
                enabled.add(controller)
            except OSError:
                pass
    return enabled & set(wanted)


class SandboxCgroup:
    """The cgroup directories of one sandbox (one for v2, one per controller for v1)."""

    def __init__(self, parents: dict[str, tuple[int, Path]]):
        self.name = f"{PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
        self.dirs: dict[str, tuple[int, Path]] = {}
        self.oom_notified = False   # v1's OOM eventfd fired (it can fire before the kernel counts a kill)
        made: dict[Path, Path] = {}
        for controller, (version, base) in parents.items():
            if base not in made:
                made[base] = base / self.name
                made[base].mkdir()
            self.dirs[controller] = (version, made[base])

    def paths(self) -> list[Path]:
        return sorted({path for _, path in self.dirs.values()})

    def limit(self, *, processes: int | None, memory: int | None) -> None:
        if processes and "pids" in self.dirs:
            (self.dirs["pids"][1] / "pids.max").write_text(str(processes))
        if memory and "memory" in self.dirs:
            version, path = self.dirs["memory"]
            if version == 2:
                (path / "memory.max").write_text(str(memory))
                _try_write(path / "memory.swap.max", "0")
                _try_write(path / "memory.oom.group", "1")
            else:
                (path / "memory.limit_in_bytes").write_text(str(memory))
                _try_write(path / "memory.memsw.limit_in_bytes", str(memory))

    def join(self) -> None:
        """Move the calling process in (called in the child, before it execs)."""
        for path in self.paths():
            (path / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_seconds(self) -> float | None:
        if "cpu" not in self.dirs:
            return None
        version, path = self.dirs["cpu"]
        try:
            if version == 2:
                for line in (path / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
                return None
            return int((path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def cpu_waited(self) -> float | None:
        """Seconds in which a process of the sandbox was ready to run but waited for a CPU (v2's cpu.pressure,
        "some"); None where there is no such accounting."""
        if "cpu" not in self.dirs or self.dirs["cpu"][0] != 2:
            return None
        return _stalled(self.dirs["cpu"][1] / "cpu.pressure")

    def oom_eventfd(self) -> int | None:
        """v1: an eventfd that becomes readable when the OOM killer acts in the sandbox (v2 kills the whole
        group itself: memory.oom.group)."""
        if "memory" not in self.dirs or self.dirs["memory"][0] != 1:
            return None
        path = self.dirs["memory"][1]
        try:
            event = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            control = os.open(path / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            (path / "cgroup.event_control").write_text(f"{event} {control}")
            os.close(control)
            return event
        except (OSError, AttributeError):
            return None

    def out_of_memory(self) -> bool:
        if self.oom_notified:
            return True
        if "memory" not in self.dirs:
            return False
        version, path = self.dirs["memory"]
        text = _read(path / ("memory.events" if version == 2 else "memory.oom_control"))
        return bool(re.search(r"^oom_kill [1-9]", text, re.M))

    def refused_forks(self) -> int:
        """How many times a new process or thread was refused at ``pids.max``."""
        if "pids" not in self.dirs:
            return 0
        match = re.search(r"^max (\d+)", _read(self.dirs["pids"][1] / "pids.events"), re.M)
        return int(match.group(1)) if match else 0

    def kill_and_remove(self) -> None:
        for path in self.paths():
            _kill_and_remove(path)


def _stalled(pressure: Path) -> float | None:
    """The "some" total of a PSI file, in seconds: the time in which at least one of its tasks waited."""
    match = re.search(r"^some .*\btotal=(\d+)", _read(pressure), re.M)
    return int(match.group(1)) / 1e6 if match else None


MACHINE_PRESSURE = Path("/proc/pressure/cpu")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants, each with its reaped children's (/proc/PID/stat)."""
    parents: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _read(entry / "stat").rsplit(")", 1)[-1].split()
            if len(fields) > 14:   # state ppid ... utime stime cutime cstime (fields 3, 4, 14-17 of proc(5))
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
                times[int(entry.name)] = sum(int(t) for t in fields[11:15]) * TICK_S
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += parents.get(pid, [])
    return total


class UsageReport:
    """The sandbox's CPU seconds, its seconds waiting for a CPU (see the module docstring; None: unknown) and the
    seconds since it started that they cover, written as JSON of `USAGE_BYTES` bytes at the start of ``fd`` every
    `USAGE_POLL_S` and when the sandbox ends."""

    def __init__(self, fd: int, cgroup: SandboxCgroup | None, pid: int):
        self.fd, self.cgroup, self.pid, self.due, self.start = fd, cgroup, pid, 0.0, time.monotonic()
        self.machine_start = None if self._cgroup_waited() is not None else _stalled(MACHINE_PRESSURE)

    def _cgroup_waited(self) -> float | None:
        return self.cgroup.cpu_waited() if self.cgroup else None

    def usage(self) -> dict[str, float | None]:
        cpu = self.cgroup.cpu_seconds() if self.cgroup else None
        if cpu is None:
            cpu = _tree_cpu_seconds(self.pid)
        waited = self._cgroup_waited()
        if waited is None and self.machine_start is not None:
            now = _stalled(MACHINE_PRESSURE)
            waited = None if now is None else now - self.machine_start
        return {"cpu_s": cpu, "waited_s": waited, "observed_s": time.monotonic() - self.start}

    def ended(self) -> None:
        """The last report, once the child was reaped; where only live processes are counted (no cgroup), the
        last one made while it ran stands."""
        if self.cgroup and self.cgroup.cpu_seconds() is not None:
            self.due = 0.0
            self.write()

    def write(self) -> None:
        if time.monotonic() < self.due:
            return
        self.due = time.monotonic() + USAGE_POLL_S
        report = json.dumps(self.usage()).encode().ljust(USAGE_BYTES)
        try:
            os.pwrite(self.fd, report, 0)
        except OSError:
            pass


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _try_write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass


def _kill_and_remove(path: Path, wait_s: float = 2.0) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        if (path / "cgroup.kill").exists():
            _try_write(path / "cgroup.kill", "1")
        for pid in _read(path / "cgroup.procs").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)


def remove_stale_cgroups() -> None:
    """Kill what is left in, and remove, the sandbox cgroups of supervisors that are no longer running."""
    for _, base in set(cgroup_parents().values()):
        try:
            children = list(base.iterdir())
        except OSError:
            continue
        for child in children:
            match = re.fullmatch(re.escape(PREFIX) + r"(\d+)-[0-9a-f]+", child.name)
            if match and not _alive(int(match.group(1))):
                _kill_and_remove(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _read(Path(f"/proc/{pid}/stat")).rsplit(")", 1)[-1].split()[:1] == ["Z"]


def _tasks_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            status = _read(entry / "status")
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields.get("Uid", "").split()[:1] == [str(uid)]:
                count += int(fields.get("Threads", "1").strip() or 1)
    return count


# --- the supervisor --------------------------------------------------------------------------------------

def _parse(argv: list[str]) -> tuple[dict, list[str]]:
    options: dict = {"memory": None, "memory_rlimit": "as", "cpu": None, "processes": None,
                     "setenv": {}, "plain": False, "bwrap": False, "parent": os.getppid(), "usage_fd": None}
    i = 0
    while argv[i] != "--":
        flag = argv[i]
        if flag in ("--plain", "--bwrap"):
            options[flag[2:]] = True
            i += 1
        elif flag == "--setenv":
            options["setenv"][argv[i + 1]] = argv[i + 2]
            i += 3
        elif flag in ("--memory", "--cpu", "--processes", "--parent", "--usage-fd"):
            options[flag[2:].replace("-", "_")] = int(argv[i + 1])
            i += 2
        elif flag == "--memory-rlimit":
            options["memory_rlimit"] = argv[i + 1]
            i += 2
        else:
            raise SystemExit(f"[sandbox] unknown option {flag}")
    return options, argv[i + 1:]


def _new_session_keyring() -> None:
    """Leave the caller's session keyring (root's, when run as root) behind: the sandbox gets an empty one."""
    number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)   # keyctl(2)
    if number:
        import ctypes
        ctypes.CDLL(None, use_errno=True).syscall(number, 1, None)      # KEYCTL_JOIN_SESSION_KEYRING, anonymous


def main(argv: list[str]) -> None:
    options, command = _parse(argv)
    plain = options["plain"]
    memory, cpu, processes = options["memory"], options["cpu"], options["processes"]
    remove_stale_cgroups()
    usage_fd = options["usage_fd"]
    if usage_fd is not None:
        os.set_inheritable(usage_fd, False)   # the supervisor's: the sandbox never gets it
    wanted = [c for c, v in (("pids", processes), ("memory", memory), ("cpu", cpu or usage_fd is not None)) if v]
    cgroup = None
    if wanted:
        try:
            parents = cgroup_parents(tuple(wanted))
            cgroup = SandboxCgroup(parents) if parents else None
            if cgroup:
                cgroup.limit(processes=processes, memory=memory)
        except OSError:
            if cgroup:
                cgroup.kill_and_remove()
            cgroup = None
    has = set(cgroup.dirs) if cgroup else set()

    limits: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
    if cpu:
        limits.append((resource.RLIMIT_CPU, cpu))
    if memory and options["memory_rlimit"] == "as":
        limits.append((resource.RLIMIT_AS, memory))
    elif memory and "memory" not in has:
        limits.append((resource.RLIMIT_DATA, memory))
    if processes and "pids" not in has and os.getuid() != 0:   # root: counted by _supervise instead
        limits.append((resource.RLIMIT_NPROC, processes + _tasks_of(os.getuid())))

    env = dict(os.environ) | options["setenv"] if plain else sandbox_environment(dict(os.environ),
                                                                                options["setenv"])
    info_r = None
    if options["bwrap"]:
        info_r, info_w = os.pipe()
        os.set_inheritable(info_w, True)
        settings = ["--info-fd", str(info_w), "--clearenv"]
        for name, value in env.items():
            settings += ["--setenv", name, value]
        command = [command[0], *settings, *command[1:]]

    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            if cgroup:
                cgroup.join()
            for which, value in limits:
                _, hard = resource.getrlimit(which)
                cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
                # RLIMIT_CPU: SIGXCPU at the cap, SIGKILL two seconds later for a process that catches it
                top = cap + 2 if which == resource.RLIMIT_CPU else cap
                resource.setrlimit(which, (cap, top if hard == resource.RLIM_INFINITY else min(top, hard)))
            if info_r is not None:
                os.close(info_r)
            for restored in (signal.SIGPIPE, signal.SIGXFSZ):   # Python ignores them; exec would keep that
                signal.signal(restored, signal.SIG_DFL)
            _new_session_keyring()
            os.execvpe(command[0], command, env)
        except BaseException as exc:   # noqa: BLE001 (the child must never return into the caller)
            sys.stderr.write(f"[sandbox] cannot start {command[0]}: {exc}\n")
            os._exit(REFUSED)
    try:
        os.setpgid(pid, pid)   # as the child does: its group exists whichever of the two runs first
    except OSError:            # the child has exec'd or exited already
        pass
    if info_r is not None:
        os.close(info_w)
    watch = processes if processes and "pids" not in has and os.getuid() == 0 and options["bwrap"] else None
    if watch:
        _outrank_the_sandbox()
    usage = UsageReport(usage_fd, cgroup, pid) if usage_fd is not None else None
    status = _supervise(pid, info_r, cgroup, options["parent"], cpu=cpu, watch_processes=watch, usage=usage)
    if usage:
        usage.ended()
    _finish(status, cgroup, memory, bwrap=options["bwrap"], processes=processes)


class _Target:
    """Where forwarded signals go: the sandbox's main process (bwrap's init's child), or the child."""

    def __init__(self, pid: int, info_r: int | None):
        self.pid, self.info_r, self.bwrap, self.init_pid, self.info = pid, info_r, info_r is not None, None, b""

    def read_info(self) -> None:
        while self.info_r is not None:
            try:
                chunk = os.read(self.info_r, 4096)
            except BlockingIOError:
                return
            self.info += chunk
            try:
                self.init_pid = json.loads(self.info.decode())["child-pid"]
            except (ValueError, KeyError):
                pass
            if not chunk or self.init_pid is not None:
                os.close(self.info_r)
                self.info_r = None

    def main_pid(self) -> int | None:
        if not self.bwrap:
            return self.pid
        self.read_info()
        if self.init_pid is None:
            return None
        children = _read(Path(f"/proc/{self.init_pid}/task/{self.init_pid}/children")).split()
        if children:
            return int(children[0])
        for entry in Path("/proc").iterdir():   # kernels without /proc/PID/task/TID/children
            if entry.name.isdigit():
                stat = _read(entry / "stat").rsplit(")", 1)[-1].split()
                if len(stat) > 1 and stat[1] == str(self.init_pid):
                    return int(entry.name)
        return None


def _supervise(pid: int, info_r: int | None, cgroup: SandboxCgroup | None, parent: int, *, cpu: int | None,
               watch_processes: int | None, usage: UsageReport | None = None) -> int:
    """Wait for the child and watch the caps; returns its wait status, or -SIGNAL when a cap killed it.

    The sandbox also ends when ``parent``, the process that started this supervisor, does (nbgrader killed, a
    worker lost): the supervisor runs in a session of its own, so nothing else would stop it."""
    target = _Target(pid, info_r)
    try:
        parent_fd = os.pidfd_open(parent)
    except (AttributeError, OSError):
        parent_fd = None
    if info_r is not None:
        os.set_blocking(info_r, False)

    def forward(signum, _frame):
        main_pid = target.main_pid()
        if main_pid:
            try:
                os.kill(main_pid, signum)
            except ProcessLookupError:
                pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    watch_cpu = cpu is not None and cgroup is not None and cgroup.cpu_seconds() is not None
    oom = cgroup.oom_eventfd() if cgroup else None
    ncpu = len(os.sched_getaffinity(0)) or 1

    def stop(signum: int, message: str | None) -> int:
        if target.init_pid:   # pid 1 of the sandbox: its death kills every process in it
            try:
                os.kill(target.init_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _kill_tree(pid, cgroup)
        os.waitpid(pid, 0)
        if message:
            sys.stderr.write(f"[sandbox] {message}\n")
        return -signum

    unwatched_since = time.monotonic()
    while True:
        timeout = None if pidfd is not None else PROCESS_POLL_S
        if parent_fd is None:
            timeout = PARENT_POLL_S if timeout is None else min(timeout, PARENT_POLL_S)
        if os.getppid() != parent:
            return stop(signal.SIGKILL, "the process that started the sandbox has ended, so the sandbox was stopped")
        if watch_processes:
            target.read_info()
            tasks = _sandbox_tasks(target.init_pid, watch_processes) if target.init_pid else None
            if tasks is not None and tasks > watch_processes:
                return stop(signal.SIGKILL, f"the sandbox had more than {watch_processes} processes and "
                                            "threads (a fork bomb?)")
            if tasks is not None:
                unwatched_since = time.monotonic()
            elif time.monotonic() - unwatched_since > UNWATCHED_S:
                return stop(signal.SIGKILL, "cannot count the sandbox's processes, so it was stopped")
            timeout = PROCESS_POLL_S
        if watch_cpu:
            used = cgroup.cpu_seconds() or 0.0
            if used >= cpu:
                return stop(signal.SIGXCPU, f"the sandbox's processes used up its CPU time ({cpu} s)")
            wait = max(0.02, min(1.0, (cpu - used) / ncpu))
            timeout = wait if timeout is None else min(timeout, wait)
        if usage:
            usage.write()
            timeout = USAGE_POLL_S if timeout is None else min(timeout, USAGE_POLL_S)
        readers = [fd for fd in (pidfd, target.info_r, oom, parent_fd) if fd is not None]
        ready = select.select(readers, [], [], timeout)[0] if readers else time.sleep(timeout) or []
        if target.info_r in ready:
            target.read_info()
        if oom is not None and oom in ready:   # the sandbox hit its memory cap: the whole sandbox goes
            cgroup.oom_notified = True
            return stop(signal.SIGKILL, None)   # _finish says so
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status


def _sandbox_tasks(init_pid: int, cap: int) -> int | None:
    """Processes and threads in the sandbox's pid namespace (counted up to just past ``cap``), read from its
    own /proc; None before it has one."""
    base = f"/proc/{init_pid}/root/proc"
    try:
        if os.path.lexists(f"{base}/self") and os.path.exists(f"{base}/self"):
            return None   # still the host's /proc (bwrap is setting up), where this process is visible
        entries = [e for e in os.listdir(base) if e.isdigit()]
    except OSError:
        return None
    total = len(entries)
    for entry in entries:
        if total > cap:
            break
        try:
            total += len(os.listdir(f"{base}/{entry}/task")) - 1
        except OSError:
            pass
    return total


def _outrank_the_sandbox() -> None:
    """Run the supervisor before the sandbox's processes, so that a fork bomb cannot starve its counting:
    real-time round robin (it sleeps nearly all the time), else a higher nice priority."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except (AttributeError, OSError):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -10)
        except OSError:
            pass


def _kill_tree(pid: int, cgroup: SandboxCgroup | None) -> None:
    for kill in (os.killpg, os.kill):   # the group, and the child itself should it not lead one yet
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if cgroup:
        for path in cgroup.paths():
            for task in _read(path / "cgroup.procs").split():
                try:
                    os.kill(int(task), signal.SIGKILL)
                except (ProcessLookupError, PermissionError, ValueError):
                    pass


def _finish(status: int, cgroup: SandboxCgroup | None, memory: int | None, *, bwrap: bool,
            processes: int | None = None) -> None:
    if status < 0:
        signum = -status
    elif os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
        # bwrap reports a command killed by signal N as status 128 + N
        signum = code - 128 if bwrap and 128 < code < 128 + signal.NSIG else 0
    if cgroup:
        if signum == signal.SIGKILL and memory and cgroup.out_of_memory():
            sys.stderr.write(f"[sandbox] the sandbox ran out of memory (its cap is {memory} bytes)\n")
        refused = cgroup.refused_forks()
        if refused:
            sys.stderr.write(f"[sandbox] {refused} new process(es) or thread(s) were refused: the sandbox's cap is "
                             f"{processes} processes and threads\n")
        cgroup.kill_and_remove()
    sys.stderr.flush()
    if not signum:
        os._exit(os.WEXITSTATUS(status))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for forwarded in FORWARDED:
        signal.signal(forwarded, signal.SIG_DFL)
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    time.sleep(1)
    os._exit(128 + signum)


if __name__ == "__main__":
    main(sys.argv[1:])
