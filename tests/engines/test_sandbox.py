"""The sandbox and the child-process runner built on it, with the real bubblewrap (CPU only).

The runner: answers, time limits, crashes and memory limits end as results, never hangs. The sandbox: one
test per property (network, filesystem, hidden course files, /tmp, process lifetime, caps, environment,
signals, the opt-out and the error without bubblewrap).
"""
import contextvars
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from processes import processes_with

from graders import settings
from graders.sandbox import confine
from graders.sandbox.run import (REPO_ROOT, ChildWatch, Confinement, SandboxUnavailable, run_child, sandbox_argv,
                                 watching)

HANDLER = textwrap.dedent('''
    import os
    def handle(request):
        what = request["what"]
        print("student noise on stdout")
        if what == "hang":
            while True:
                pass
        if what == "raise":
            raise ValueError("bad input")
        if what == "exit":
            os._exit(3)
        if what == "allocate":
            return {"n": len(bytearray(8 << 30))}
        return {"echo": what}
''')


@pytest.fixture
def handler(tmp_path, monkeypatch):
    (tmp_path / "fake_handler.py").write_text(HANDLER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sys.path.insert(0, str(tmp_path))
    yield "fake_handler"
    sys.path.remove(str(tmp_path))


def test_answer_comes_back_on_the_private_channel_not_stdout(handler):
    result = run_child(handler, {"what": "hello"}, timeout_s=10)
    assert result.ok and result.answer == {"echo": "hello"}


def test_hanging_child_is_stopped_within_its_limit(handler):
    start = time.monotonic()
    result = run_child(handler, {"what": "hang"}, timeout_s=1.5)
    assert result.status == "timeout" and "1.5 s" in result.message
    assert time.monotonic() - start < 5


def test_an_abandoned_watch_kills_its_running_children_and_each_one_started_later(handler):
    """Children started inside `watching` in other threads (a context copied into each): `abandon` ends the one
    running long before its limit, and one started after it at once; a child outside the watch runs on."""
    watch = ChildWatch()

    def watched(what: str):
        with watching(watch):
            return run_child(handler, {"what": what}, timeout_s=60)
    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        hanging = pool.submit(contextvars.copy_context().run, watched, "hang")
        time.sleep(1.0)
        watch.abandon()
        assert hanging.result().status == "crashed" and time.monotonic() - start < 10
        assert pool.submit(watched, "hello").result().status == "crashed"
    assert run_child(handler, {"what": "hello"}, timeout_s=10).answer == {"echo": "hello"}


def test_exception_in_handler_is_an_answer(handler):
    result = run_child(handler, {"what": "raise"}, timeout_s=10)
    assert result.ok and result.answer["error"] == "ValueError: bad input"


def test_dying_child_is_reported_as_crashed(handler):
    result = run_child(handler, {"what": "exit"}, timeout_s=10)
    assert result.status == "crashed" and "status 3" in result.message


def test_memory_limit_stops_a_huge_allocation(handler):
    result = run_child(handler, {"what": "allocate"}, timeout_s=10, memory_bytes=2 << 30)
    assert result.answer["error"].startswith("MemoryError")


def test_a_child_that_names_no_memory_cap_gets_the_default_one(handler, monkeypatch):
    monkeypatch.setenv("WORKSHOP_CHILD_MEMORY_GIB", "2")
    result = run_child(handler, {"what": "allocate"}, timeout_s=10)
    assert result.answer["error"].startswith("MemoryError")


@pytest.mark.parametrize("value", ["0", "-1", "lots", "nan", "inf"])
def test_a_child_memory_cap_that_is_not_a_positive_size_is_refused(monkeypatch, value):
    monkeypatch.setenv("WORKSHOP_CHILD_MEMORY_GIB", value)
    with pytest.raises(ValueError, match="WORKSHOP_CHILD_MEMORY_GIB"):
        settings.child_memory_bytes()


# --- the sandbox itself: one test per property, through run_child or sandbox_argv, with the real bwrap ---

DETACH = textwrap.dedent('''
    import os, sys
    def detach(marker):
        """A grandchild in a session of its own (double fork), running with ``marker`` in its argv."""
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.close(r)
                os.write(w, b"x")
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", marker])
            os._exit(0)
        os.close(w)
        assert os.read(r, 1) == b"x"
''')


def sandboxed(code: str, confinement: Confinement = Confinement(), *, env=None, timeout=60):
    return subprocess.run(sandbox_argv([sys.executable, "-c", code], confinement, env=env),
                          capture_output=True, text=True, timeout=timeout)


def gone(marker: str, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stale_cgroups() -> list[Path]:
    return [child for _, base in set(confine.cgroup_parents().values()) for child in base.iterdir()
            if child.name.startswith(confine.PREFIX)
            and not Path(f"/proc/{child.name.split('-')[2]}").exists()]


def stale_cgroups_after_cleanup(within_s: float = 10.0) -> list[Path]:
    """The sandbox cgroups of dead supervisors that `confine.remove_stale_cgroups` has not removed after trying for
    ``within_s``: on a loaded machine a killed sandbox's processes may take longer to be reaped than one call waits,
    and another test's supervisor may die between a call and the check (the next call removes its cgroup)."""
    deadline = time.monotonic() + within_s
    while True:
        confine.remove_stale_cgroups()
        stale = stale_cgroups()
        if not stale or time.monotonic() > deadline:
            return stale
        time.sleep(0.1)


CGROUPS = confine.cgroup_parents()
needs_cgroup = {c: pytest.mark.skipif(c not in CGROUPS, reason=f"no writable {c} cgroup here")
                for c in ("pids", "memory", "cpu")}


def test_no_network(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = ("import socket\n"
                f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('connected')\n"
                "except OSError as exc:\n    print('refused', type(exc).__name__)\n")
        done = sandboxed(code)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("refused")
        with socket.create_connection(("127.0.0.1", port), timeout=3):   # while the host can connect
            pass


def test_filesystem_is_read_only():
    targets = ["/etc/sandbox-test", "/usr/sandbox-test", str(REPO_ROOT / "graders" / "sandbox-test"),
               f"{sys.prefix}/sandbox-test", "/sandbox-test",
               "/proc/sys/vm/drop_caches"]   # host sysctls: the sandbox's uid is root's when run as root
    if not REPO_ROOT.is_relative_to("/tmp"):   # a checkout under /tmp lies in the sandbox's private /tmp
        targets.append(str(REPO_ROOT / "sandbox-test"))
    code = ("import os\n"
            f"for path in {targets!r}:\n"
            "    try:\n        open(path, 'w')\n        print('wrote', path)\n"
            "    except OSError as exc:\n        print('refused', path, exc.strerror)\n")
    done = sandboxed(code)
    assert done.returncode == 0, done.stderr
    assert "wrote" not in done.stdout and done.stdout.count("refused") == len(targets)
    assert not any(Path(t).exists() for t in targets if not t.startswith("/proc"))


def test_course_files_are_hidden_and_grader_code_and_specs_are_readable(tmp_path, monkeypatch):
    course = Path("/var/tmp") / f"sandbox-course-{uuid.uuid4().hex}"   # outside /tmp, which is private anyway
    try:
        (course / "submitted" / "alice" / "ps1").mkdir(parents=True)
        (course / "submitted" / "alice" / "ps1" / "ps1.ipynb").write_text("{}")
        (course / "gradebook.db").write_text("grades")
        (course / "tracks" / "ps1" / "solutions").mkdir(parents=True)
        (course / "tracks" / "ps1" / "spec.toml").write_text("name = 'ps1'\n")
        (course / "tracks" / "ps1" / "solutions" / "ps1.cu").write_text("// reference")
        (course / "assignments" / "ps1").mkdir(parents=True)
        (course / "assignments" / "ps1" / "ps1.ipynb").write_text("{}")
        notebooks = sorted(REPO_ROOT.glob("assignments/*/*.ipynb"))
        home_files = [p for p in Path.home().iterdir() if p.is_file()]
        invisible = [REPO_ROOT / "tracks" / "gemm" / "solutions", REPO_ROOT / "tracks" / "puzzles" / "notebook.py",
                     course / "submitted", course / "gradebook.db", course / "tracks" / "ps1" / "solutions",
                     course / "assignments" / "ps1" / "ps1.ipynb", *notebooks, *home_files[:1]]
        if (REPO_ROOT / "gradebook.db").exists():
            invisible.append(REPO_ROOT / "gradebook.db")
        readable = [REPO_ROOT / "graders" / "sandbox" / "run.py", REPO_ROOT / "tracks" / "puzzles" / "problem.py",
                    REPO_ROOT / "tracks" / "gemm" / "spec.toml", course / "tracks" / "ps1" / "spec.toml"]
        assert notebooks and all(p.exists() for p in invisible + readable)
        code = ("import os, graders.cuda_engine.spec\n"
                f"for p in {[str(p) for p in invisible]!r}:\n"
                "    print('visible' if os.path.exists(p) else 'hidden', p)\n"
                f"for p in {[str(p) for p in readable]!r}:\n    open(p).read()\n    print('read', p)\n"
                "print(graders.cuda_engine.spec.load_spec('gemm').name)\n")
        # a track's solutions/ on PYTHONPATH stays hidden all the same
        done = sandboxed(code, Confinement(hide=(course,)),
                         env={"PYTHONPATH": f"{REPO_ROOT / 'tracks' / 'gemm' / 'solutions'}:{REPO_ROOT}"})
        assert done.returncode == 0, done.stderr
        assert "visible" not in done.stdout
        assert done.stdout.count("hidden") == len(invisible) and done.stdout.count("read") == len(readable)
        assert done.stdout.strip().endswith("gemm")
        # a course named by WORKSHOP_ROOT is hidden the same way, without being passed in `hide`
        monkeypatch.setenv("WORKSHOP_ROOT", str(course))
        done = sandboxed(code.replace("load_spec('gemm').name", "spec_path('ps1').read_text()"))
        assert done.returncode == 0, done.stderr
        assert "visible" not in done.stdout and done.stdout.strip().endswith("name = 'ps1'")
    finally:
        shutil.rmtree(course, ignore_errors=True)


def test_writable_dirs_are_writable_inside_a_hidden_course(tmp_path):
    course = Path("/var/tmp") / f"sandbox-course-{uuid.uuid4().hex}"
    sockets = course / "kernel"
    try:
        sockets.mkdir(parents=True)
        (course / "gradebook.db").write_text("grades")
        code = (f"open({str(sockets / 'out')!r}, 'w').write('hi')\n"
                f"import os; print(os.path.exists({str(course / 'gradebook.db')!r}))\n")
        done = sandboxed(code, Confinement(writable=(sockets,), hide=(course,)))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "False" and (sockets / "out").read_text() == "hi"
    finally:
        shutil.rmtree(course, ignore_errors=True)


def test_dev_is_minimal():
    done = sandboxed("import os; print(sorted(os.listdir('/dev')))")
    assert done.returncode == 0, done.stderr
    names = set(eval(done.stdout))
    assert names <= {"null", "zero", "full", "random", "urandom", "tty", "console", "ptmx", "pts", "shm",
                     "fd", "stdin", "stdout", "stderr", "core", "mqueue"}


def test_tmp_is_private_writable_and_not_shared_between_sandboxes(tmp_path):
    host_marker = tmp_path / "host-marker"
    host_marker.write_text("host")
    first = subprocess.Popen(sandbox_argv([sys.executable, "-c",
        "import os, sys, time\n"
        f"print(os.path.exists({str(host_marker)!r}))\n"
        "open('/tmp/first', 'w').write('first')\n"
        "print('written', flush=True)\n"
        "sys.stdin.read()\n"], Confinement()), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "False"
        assert first.stdout.readline().strip() == "written"
        second = sandboxed("import os; open('/tmp/second', 'w').write('x'); print(os.listdir('/tmp'))")
        assert second.returncode == 0, second.stderr
        listing = eval(second.stdout)   # besides mount points of code re-exposed from under /tmp, if any
        assert "second" in listing and "first" not in listing
    finally:
        first.communicate("", timeout=30)
    assert first.returncode == 0
    assert not Path("/tmp/first").exists() and not Path("/tmp/second").exists()


def test_detached_grandchild_dies_when_the_sandbox_main_process_exits():
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    start = time.monotonic()
    done = sandboxed(DETACH + f"detach({marker!r})\nprint('detached')\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "detached"
    assert gone(marker), "the detached grandchild outlived its sandbox"
    assert time.monotonic() - start < 15


STARTER = textwrap.dedent('''
    import subprocess, sys, time
    from graders.sandbox.run import Confinement, sandbox_argv
    command = [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]]
    subprocess.Popen(sandbox_argv(command, Confinement()), start_new_session=True)
    print("started", flush=True)
    time.sleep(300)
''')


def test_the_sandbox_ends_with_the_process_that_started_it():
    """nbgrader or a fleet worker killed outright: its sandboxes (each in a session of its own) go with it."""
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-c", STARTER, marker], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(marker), "the sandboxed process did not start"
    finally:
        proc.kill()
        proc.wait()
    assert gone(marker, within_s=5.0), "the sandbox outlived the process that started it"


DETACH_HANDLER = DETACH + textwrap.dedent('''
    def handle(request):
        detach(request["marker"])
        while True:
            pass
''')


def test_timeout_kills_the_whole_sandbox(tmp_path, monkeypatch):
    (tmp_path / "detaching_handler.py").write_text(DETACH_HANDLER)
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    result = run_child("detaching_handler", {"marker": marker}, timeout_s=3, env={"PYTHONPATH": str(tmp_path)})
    assert result.status == "timeout"
    assert gone(marker), "a process of the sandbox outlived its timeout"
    assert stale_cgroups_after_cleanup() == []


@pytest.fixture(params=["cgroup", "fallback"])
def caps(request, monkeypatch):
    """Each cap test runs with the caps this machine's cgroups give, and with the fallbacks (no cgroup)."""
    if request.param == "cgroup" and not CGROUPS:
        pytest.skip("no writable cgroup here")
    if request.param == "fallback":
        monkeypatch.setenv("WORKSHOP_SANDBOX_CGROUPS", "off")
    return request.param


def test_memory_cap_stops_a_large_allocation(caps):
    done = sandboxed("x = bytearray(2 << 30)\nprint('allocated')", Confinement(memory_bytes=512 << 20))
    assert "allocated" not in done.stdout and "MemoryError" in done.stderr


def test_gpu_sandbox_memory_cap_stops_a_large_allocation(caps):
    # a GPU sandbox has no address-space limit (CUDA reserves far more than it uses): the cgroup, or else
    # RLIMIT_DATA, stops the allocation; no GPU is needed for that
    done = sandboxed("x = bytearray(2 << 30)\nprint('allocated')", Confinement(gpu=True, memory_bytes=512 << 20))
    assert "allocated" not in done.stdout and done.returncode != 0


@needs_cgroup["memory"]
def test_memory_cap_covers_the_whole_sandbox():
    # two processes of 300 MB each: each is under the 400 MB cap, together they are not
    code = "import os, time\nos.fork()\nx = bytearray(300 << 20)\ntime.sleep(2)\nprint('allocated', flush=True)"
    done = sandboxed(code, Confinement(memory_bytes=400 << 20), timeout=60)
    assert done.returncode == -signal.SIGKILL and "allocated" not in done.stdout
    assert "ran out of memory" in done.stderr


def test_cpu_time_cap_stops_a_busy_loop(caps):
    start = time.monotonic()
    done = sandboxed("while True:\n    pass", Confinement(cpu_seconds=1), timeout=30)
    assert done.returncode == -signal.SIGXCPU
    assert time.monotonic() - start < 10


@needs_cgroup["cpu"]
def test_cpu_time_cap_covers_the_whole_sandbox():
    # three processes of 0.6 s CPU each: each is under the 1 s cap, together they are not
    code = ("import os, time\nos.fork(); os.fork()\n"
            "while time.process_time() < 0.6:\n    pass\ntime.sleep(5)\nprint('done')")
    done = sandboxed(code, Confinement(cpu_seconds=1), timeout=30)
    assert done.returncode == -signal.SIGXCPU and "done" not in done.stdout
    assert "CPU time" in done.stderr


def test_process_cap_limits_the_sandbox(caps):
    code = textwrap.dedent('''
        import os, time
        started = 0
        try:
            for _ in range(200):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                started += 1
                time.sleep(0.01)
        except OSError as exc:
            print(started, exc.strerror)
        else:
            print(started, "no limit")
    ''')
    done = sandboxed(code, Confinement(max_processes=40), timeout=60)
    if done.returncode == -signal.SIGKILL:   # root without a pids cgroup: counted, and killed past the cap
        assert "more than 40 processes" in done.stderr
    else:                                    # pids cgroup or RLIMIT_NPROC: fork fails at the cap
        started, why = done.stdout.split(" ", 1)
        assert int(started) < 40 and "no limit" not in why, done.stdout + done.stderr
        if caps == "cgroup" and "pids" in confine.cgroup_parents(("pids",)):   # the supervisor names the cap
            assert "the sandbox's cap is 40 processes and threads" in done.stderr, done.stderr


def test_fork_bomb_is_contained(caps):
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    argv = sandbox_argv([sys.executable, "-c", code, marker],
                        Confinement(max_processes=32, memory_bytes=1 << 30, cpu_seconds=20))
    bomb = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, peak = time.monotonic() + 3, 0
        while time.monotonic() < deadline and bomb.poll() is None:
            peak = max(peak, len(processes_with(marker)))
            time.sleep(0.02)
        if caps == "cgroup" and "pids" in CGROUPS:
            # the cap counts bwrap's two processes; the supervisor, outside the sandbox, has the marker too
            assert peak <= 32 + 1 and bomb.poll() is None
        else:   # counted every 50 ms and killed past the cap, or RLIMIT_NPROC
            assert bomb.poll() == -signal.SIGKILL or os.getuid() != 0
    finally:
        if bomb.poll() is None:
            os.killpg(bomb.pid, signal.SIGKILL)
        bomb.communicate(timeout=30)
    assert gone(marker, within_s=10), "the fork bomb outlived its sandbox"
    assert stale_cgroups_after_cleanup() == []


def test_a_grader_run_from_the_hosts_tmp_still_gives_the_sandbox_its_own(tmp_path, monkeypatch):
    # a script run from /tmp has /tmp on sys.path: binding it would show the host's /tmp (other gradings' files)
    # over the sandbox's own and make it read-only
    marker = Path("/tmp") / f"host-only-{uuid.uuid4().hex}"
    marker.write_text("host")
    monkeypatch.setattr(sys, "path", ["/tmp", *sys.path])
    try:
        done = sandboxed(f"import os, tempfile; print(os.path.exists({str(marker)!r}), tempfile.mkdtemp())",
                         env={"PYTHONPATH": "/tmp"})
    finally:
        marker.unlink()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "False" and done.stdout.split()[1].startswith("/tmp/")


def test_environment_secrets_are_not_visible(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GRADEBOOK_URL", "postgresql://grader:secret@db/grades")
    monkeypatch.setenv("WORKSHOP_API_TOKEN", "secret-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-key")
    monkeypatch.setenv("WORKSHOP_CELL_TIMEOUT", "20")
    done = sandboxed("import os, json; print(json.dumps(dict(os.environ)))", env={"EXTRA": "passed"})
    assert done.returncode == 0, done.stderr
    inside = eval(done.stdout)
    assert "secret" not in done.stdout
    assert inside["WORKSHOP_CELL_TIMEOUT"] == "20" and inside["EXTRA"] == "passed" and inside["HOME"] == "/tmp"
    assert not {"WORKSHOP_GRADEBOOK_URL", "WORKSHOP_API_TOKEN", "AWS_SECRET_ACCESS_KEY"} & set(inside)


def test_interrupt_reaches_the_sandboxed_process():
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGINT, lambda *a: (print('interrupted', flush=True), sys.exit(0)))\n"
            "print('ready', flush=True)\ntime.sleep(30)\n")
    proc = subprocess.Popen(sandbox_argv([sys.executable, "-c", code], Confinement()), stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    os.killpg(proc.pid, signal.SIGINT)   # what Jupyter sends: the signal goes to the process group
    out, _ = proc.communicate(timeout=10)
    assert out.strip() == "interrupted" and proc.returncode == 0


def test_sandbox_off_runs_unconfined(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_SANDBOX", "off")
    monkeypatch.setenv("WORKSHOP_GRADEBOOK_URL", "postgresql://secret")
    code = (f"import os\nopen({str(tmp_path / 'out')!r}, 'w').write('x')\n"
            f"print(os.path.exists({str(REPO_ROOT / 'tracks' / 'gemm' / 'solutions')!r}), os.environ['WORKSHOP_GRADEBOOK_URL'])")
    done = sandboxed(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "postgresql://secret"] and (tmp_path / "out").exists()


def test_missing_bwrap_raises_with_how_to(monkeypatch, handler):
    monkeypatch.setenv("WORKSHOP_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailable) as raised:
        sandbox_argv(["true"], Confinement())
    message = str(raised.value)
    assert "/nonexistent/bwrap" in message and "apt-get install bubblewrap" in message
    assert "unprivileged_userns_clone" in message and "WORKSHOP_SANDBOX=off" in message
    with pytest.raises(SandboxUnavailable):
        run_child(handler, {"what": "hello"}, timeout_s=10)


def test_service_sockets_under_run_cannot_be_reached(tmp_path):
    """A unix socket stays connectable on a read-only mount: /run (PostgreSQL, dockerd, ...) is hidden."""
    import tempfile
    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run to put a test socket in")
    folder = tempfile.mkdtemp(dir="/run")
    path = os.path.join(folder, "service.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({path!r}); s.send(b'escaped')"
    done = subprocess.run(sandbox_argv([sys.executable, "-c", code], Confinement()), capture_output=True,
                          text=True, timeout=60)
    server.settimeout(1)   # the sandbox has ended: a connection it made is waiting in the backlog
    received = _accept_one(server)
    server.close()
    shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode != 0 and ("FileNotFoundError" in done.stderr or "No such file" in done.stderr)
    assert received is None


def _accept_one(server):
    try:
        conn, _ = server.accept()
    except OSError:
        return None
    return conn.recv(100)


def test_nothing_outside_the_allowlist_is_there(tmp_path, monkeypatch):
    """A course the caller runs in, a classmate's submission in an exchange outside it, a backup of the solutions,
    another home: none of them exists inside, nor do the host's /var, /srv, /mnt, /home or /run (folders that lead
    to the Python installation or CUDA, such as /root for a pyenv or /opt for a venv, hold only that: see the
    visible tree's test)."""
    base = Path("/var/tmp") / f"sandbox-allowlist-{uuid.uuid4().hex}"   # not under /tmp, which is private anyway
    course, exchange, backup = base / "course", base / "exchange", base / "backup"
    try:
        (course / "nbgrader_config.py").parent.mkdir(parents=True)
        (course / "nbgrader_config.py").write_text("c = get_config()\n")
        (exchange / "kernel-workshop" / "inbound" / "bob+puzzles+2026").mkdir(parents=True)
        (exchange / "kernel-workshop" / "inbound" / "bob+puzzles+2026" / "puzzles.ipynb").write_text("{}")
        (backup / "solutions").mkdir(parents=True)
        (backup / "solutions" / "naive.cu").write_text("// reference")
        monkeypatch.chdir(course)
        paths = [course, exchange, backup, base, "/var", "/srv", "/mnt", "/home", "/run", "/media", "/boot",
                 "/usr/src", "/etc/shadow", "/etc/ssh", "/etc/hostname"]
        done = sandboxed(f"import os\nfor p in {[str(p) for p in paths]!r}:\n"
                         "    print('there' if os.path.lexists(p) and (not os.path.isdir(p) or os.listdir(p))"
                         " else 'absent', p)")
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("absent") == len(paths), done.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


# What the trust model (docs/trust-model.md) says a sandbox sees (besides the Python installation, the grader package
# and the tracks' grader files): mount points inside, and the few files of /etc.
DOCUMENTED_MOUNTS = {"/", "/usr", "/usr/local", "/usr/src", "/tmp", "/dev", "/dev/shm", "/dev/pts", "/proc"}
DOCUMENTED_ETC = {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "passwd", "group", "hosts",
                  "host.conf", "localtime", "timezone", "os-release", "alternatives"}
DEVICES = {"null", "zero", "full", "random", "urandom", "tty", "console", "ptmx"}


def _python_and_cuda_roots() -> list[Path]:
    """The Python installation's folders, the CUDA toolkit, and CUDA's library folders the linker's cache names."""
    from graders.sandbox.visible import CUDA_TOOLKITS, cuda_library_dirs
    entries = [*CUDA_TOOLKITS, *cuda_library_dirs(), sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
               *sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep),
               *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)]
    return [q for e in entries if e and os.path.isabs(e) for q in (Path(e), Path(e).resolve())]


def test_the_visible_tree_is_the_documented_allowlist():
    """Every mount inside a (CPU) sandbox, and every file or folder of its root outside those mounts, is one the
    trust model lists (docs/trust-model.md); the tree is printed (pytest -s shows it)."""
    code = textwrap.dedent("""
        import os
        mounts = sorted({line.split()[4] for line in open('/proc/self/mountinfo')})
        print('\\n'.join('mount ' + m for m in mounts))
        for folder, dirs, files in os.walk('/'):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in mounts]
            for name in dirs + files:
                print('entry', os.path.join(folder, name))
    """)
    done = sandboxed(code)
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    mounts = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("mount ")]
    entries = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("entry ")]
    python = _python_and_cuda_roots()
    grader = [REPO_ROOT / "graders", *REPO_ROOT.glob("tracks/*/spec.toml"), *REPO_ROOT.glob("tracks/*/structure.toml"),
              *REPO_ROOT.glob("tracks/*/problem.py")]

    def documented(path: str) -> bool:
        p = Path(path)
        return (path in DOCUMENTED_MOUNTS
                or (p.parent == Path("/etc") and p.name in DOCUMENTED_ETC)
                or (p.parent == Path("/dev") and p.name in DEVICES)
                or path.startswith("/proc/")
                or any(p == r or r in p.parents for r in python)
                or p.resolve() in [g.resolve() for g in grader])

    assert [m for m in mounts if not documented(m)] == []
    assert set(mounts) >= {"/usr", "/tmp", str(REPO_ROOT / "graders"), str(REPO_ROOT / "tracks/gemm/spec.toml")}
    # the skeleton outside the mounts: links into /usr, and the folders that lead to a mount
    links = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}
    stray = [e for e in entries if e not in links and e not in mounts and not any(m.startswith(e.rstrip("/") + "/") for m in mounts)]
    assert stray == []
    assert not any(e.startswith(str(REPO_ROOT / "tracks" / "gemm" / "solutions")) for e in entries + mounts)


def test_a_kernel_cannot_include_a_copy_of_the_solutions_from_elsewhere():
    """A reference in another copy of the project (a backup, a second checkout) compiles when included from the
    host, and not in the sandboxed compile of the grading children: the copy is not there."""
    from graders.cuda_engine.compile import CompileError, compile_cuda
    from graders.cuda_engine.structure import inspect
    copy = Path("/var/tmp") / f"sandbox-copy-{uuid.uuid4().hex}" / "tracks" / "transpose" / "solutions"
    try:
        copy.mkdir(parents=True)
        shutil.copy(REPO_ROOT / "tracks" / "transpose" / "solutions" / "tiled.cu", copy / "tiled.cu")
        cheat = f'#include "{copy / "tiled.cu"}"\n'
        assert compile_cuda(cheat, kernels=("transpose_tiled",), defines={"TILE_X": 32, "TILE_Y": 32, "BLOCK_Y": 8}).cubin
        with pytest.raises(CompileError, match="cannot open source file"):
            inspect("transpose", "tiled", cheat, disassemble=False)
    finally:
        shutil.rmtree(copy.parents[2], ignore_errors=True)
