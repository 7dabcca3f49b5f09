"""A fleet on one machine, for the fleet tests and the throughput benchmark: redis-server, PostgreSQL and
``workshop worker`` processes started as children, bound to 127.0.0.1 on free ports, and stopped.

Each needs Debian's packages (``redis-server``, ``postgresql``); `missing` says which binaries are absent.
"""
from __future__ import annotations

import atexit
import ctypes
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workshop.fleet.processes import kill_tree


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def missing() -> list[str]:
    """The server binaries this machine lacks."""
    needed = {"redis-server": shutil.which("redis-server"), "redis-cli": shutil.which("redis-cli"),
              "initdb": _pg_binary("initdb"), "postgres": _pg_binary("postgres")}
    return [name for name, path in needed.items() if not path]


def _wait(check, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not come up in {timeout:g} s")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Redis:
    """redis-server with append-only persistence in ``folder``: a restart keeps the queue."""

    def __init__(self, folder: Path):
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> Redis:
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.folder),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "yes"],
            stdout=open(self.folder / "redis.log", "ab"), stderr=subprocess.STDOUT)
        _wait(self.ping, "redis-server")
        return self

    def ping(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited: {(self.folder / 'redis.log').read_text()[-2000:]}")
        return subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG"

    def stop(self) -> None:
        _stop(self.proc)

    def restart(self, down_s: float = 0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


class Postgres:
    """A PostgreSQL cluster made with initdb in a new folder, trusting local connections, with one database
    ``gradebook``. Run as root, it belongs to an unprivileged user (the server refuses root) and lies in a
    folder of its own under the system's temporary directory, which that user can reach."""

    def __init__(self):
        self.port = free_port()
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres" if _has_user("postgres") else "nobody"
        self.folder = Path(tempfile.mkdtemp(prefix="workshop-postgres-"))
        self.data = self.folder / "data"
        self.url = f"postgresql+psycopg://workshop@127.0.0.1:{self.port}/gradebook"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Postgres:
        if self.user:
            shutil.chown(self.folder, self.user)
        if not self.data.is_dir():
            made = subprocess.run([_pg_binary("initdb"), "-D", str(self.data), "-U", "workshop", "--auth=trust",
                                   "--no-sync", "-E", "UTF8"], capture_output=True, text=True, user=self.user)
            if made.returncode != 0:
                raise RuntimeError(f"initdb failed: {made.stdout}{made.stderr}")
        self.proc = subprocess.Popen(
            [_pg_binary("postgres"), "-D", str(self.data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
             "-c", f"unix_socket_directories={self.folder}", "-c", "fsync=off"],
            stdout=open(self.folder / "postgres.log", "ab"), stderr=subprocess.STDOUT, user=self.user)
        _wait(self._ready, "postgres")
        return self

    def _connect(self, db: str):
        import psycopg
        return psycopg.connect(host="127.0.0.1", port=self.port, user="workshop", dbname=db, autocommit=True)

    def _ready(self) -> bool:
        import psycopg
        try:
            with self._connect("postgres") as conn:
                if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'gradebook'").fetchone():
                    conn.execute("CREATE DATABASE gradebook")
            return True
        except psycopg.OperationalError:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.folder / 'postgres.log').read_text()[-2000:]}")
            return False

    def database(self, name: str, template: str | None = None) -> str:
        """A new database, empty or a copy of the database ``template`` (which nothing may be connected to);
        its SQLAlchemy URL."""
        with self._connect("postgres") as conn:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def stop(self) -> None:
        """Stop the server (PostgreSQL's fast shutdown) and remove the cluster."""
        _stop(self.proc, signal.SIGINT)
        shutil.rmtree(self.folder, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
_STARTED: list[Worker] = []   # every worker this process started: killed when it exits


def _die_with(parent: int) -> None:
    """In a child before it runs its program: SIGKILL when ``parent`` (the process that started it) dies, also
    when nothing in it could clean up (a test run killed)."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:   # it died before the line above
        os._exit(1)


@atexit.register
def _kill_started() -> None:
    for worker in _STARTED:
        worker.kill()


class Worker:
    """``workshop worker`` in a session of its own (so that it can be killed whole), logging to a file. It dies
    with the process that started it: at its exit (a test run stopped with Ctrl-C) or when it is killed (the
    worker's Celery pool process dies with the worker, as Celery arranges)."""

    def __init__(self, name: str, log: Path, env: dict[str, str], args: tuple[str, ...] = ("--sim",)):
        self.name, self.log, self.env, self.args = name, log, env, args
        self.proc: subprocess.Popen | None = None

    def start(self) -> Worker:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        parent = os.getpid()
        self.proc = subprocess.Popen([sys.executable, "-m", "workshop.cli", "worker", *self.args,
                                      f"--name={self.name}"], env=self.env, start_new_session=True,
                                     preexec_fn=lambda: _die_with(parent),
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        _STARTED.append(self)
        return self

    def wait_ready(self, timeout: float = 60) -> Worker:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited ({self.proc.returncode}):\n{self.log_text()}")
            return f"{self.name} ready." in self.log_text()
        _wait(ready, f"worker {self.name}", timeout)
        return self

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the worker and every process below it, as when its machine dies; then what is left of its
        session's process group (a grading's nbgrader whose pool process was killed first)."""
        if self.proc and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            os.killpg(self.proc.pid, signal.SIGKILL)   # unreaped, the worker still holds its group's id
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)   # a warm shutdown: the task in hand finishes first
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
