"""What a sandbox sees of the host: an allowlist, bound read-only into an empty root.

Nothing of the host is visible unless it is on this list (`visible`):

- **the system's programs and libraries**: ``/usr`` without ``/usr/local`` and ``/usr/src`` (each an empty
  tmpfs), and ``/bin``, ``/sbin``, ``/lib*`` (as the symlinks into ``/usr`` they are on a merged-/usr system);
- **a few files of /etc** (`ETC_FILES`): the dynamic linker's cache and configuration, the user and group
  databases (world-readable everywhere) and name-service switch, hosts, time zone, OS release and the
  alternatives' symlinks;
- **the Python installation(s)**: ``sys.prefix``, ``sys.base_prefix``, ``sys.exec_prefix`` and the directories on
  ``sys.path`` and ``PYTHONPATH`` that are not a course (`looks_private`), and the directories on
  ``LD_LIBRARY_PATH`` likewise; never ``/`` or a directory the sandbox has its own of (`PRIVATE`: a grader run
  from the host's ``/tmp`` has it on ``sys.path``) or one above them;
- **the grader**: this package's ``graders/`` folder, and each track's grader files
  (`graders.tracks.GRADER_FILES`: ``spec.toml``, ``structure.toml``, ``problem.py``), file by file, since the
  solutions sit beside them;
- **CUDA**: the CUDA toolkit (`CUDA_TOOLKITS`, ``$CUDA_HOME``, ``$CUDA_PATH``: NVVM and libdevice for numba-cuda
  on a GPU, cuobjdump and nvdisasm), the folders of the CUDA driver's and toolkit's libraries that the dynamic
  linker's cache names (`CUDA_LIBRARIES`: numba-cuda loads the runtime library at import, also for the
  simulator), and the installation folder of each tool a grading child runs under (compute-sanitizer, ncu);
- **for a GPU sandbox**: ``/sys`` (the driver reads the PCI tree); the device nodes are `graders.sandbox.run`'s.

Besides: a fresh ``/proc``, a minimal ``/dev``, a private ``/tmp`` and ``/dev/shm``, and the directories a
caller makes writable. A path that holds a course or lies in one (`looks_private`: an nbgrader course directory,
a checkout, solutions, submissions, an exchange) is never bound whole, even when it is on a Python path; the
grader's own checkout contributes only its ``graders/``, the grader files and a virtual environment in it.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from graders import settings
from graders.tracks import GRADER_FILES

CODE_PACKAGES = ("graders",)
CUDA_TOOLKITS = ("/usr/local/cuda",)   # with $CUDA_HOME and $CUDA_PATH: NVVM, libdevice, cuobjdump, nvdisasm
# Names whose presence in a folder marks it as a course or a checkout: never bound whole.
COURSE_PRIVATE = ("tracks", "solutions", "source", "assignments", "submitted", "autograded", "release", "feedback",
                  "exchange", "inbound", "outbound", "gradebook.db", "nbgrader_config.py", ".git")
SYSTEM_DIRS = ("/usr",)
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
PRIVATE = ("/tmp", "/dev/shm", "/dev", "/proc")   # the sandbox's own: a Python path there is never the host's
SYSTEM_HIDDEN = ("/usr/local", "/usr/src")   # locally installed software and sources: bound only as needed
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "passwd", "group", "hosts",
             "host.conf", "localtime", "timezone", "os-release", "alternatives")
# The CUDA driver's and toolkit's libraries, found through the dynamic linker's cache (numba-cuda loads the
# runtime library at import, also for the simulator).
CUDA_LIBRARIES = re.compile(r"^\s*(libcuda|libnvidia|libcudart|libnvrtc|libnvJitLink|libcublas|libcupti|libnvToolsExt)"
                            r"\S*\s.*=>\s*(\S+)$")


@dataclass(frozen=True)
class View:
    """The allowlist of one sandbox, in the order bubblewrap applies it."""

    binds: tuple[tuple[str, str], ...]      # (host path, path inside), read-only
    links: tuple[tuple[str, str], ...]      # (target, link) symlinks made inside
    empty: tuple[str, ...]                  # directories covered by an empty read-only tmpfs

    def args(self) -> list[str]:
        out: list[str] = []
        for target, link in self.links:
            out += ["--symlink", target, link]
        bound_system = [(s, d) for s, d in self.binds if d in SYSTEM_DIRS]
        for source, dest in bound_system:
            out += ["--ro-bind", source, dest]
        for path in self.empty:
            out += ["--size", "65536", "--tmpfs", path]
        for source, dest in self.binds:
            if (source, dest) not in bound_system:
                out += ["--ro-bind", source, dest]
        for path in self.empty:
            out += ["--remount-ro", path]
        return out


def resolved(path) -> Path | None:
    """``path`` with every link followed, or None where it does not exist."""
    try:
        return Path(path).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None


def within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def looks_private(path: Path, courses: Iterable[Path] = ()) -> bool:
    """True when binding ``path`` whole could show a course: it holds one of `COURSE_PRIVATE`, it holds one of
    ``courses``, or it lies in one (except the Python installation, e.g. a virtual environment in a checkout)."""
    prefixes = [r for r in (resolved(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}) if r]
    for course in courses:
        if within(course, path):
            return True
        if within(path, course) and not any(within(path, prefix) for prefix in prefixes):
            return True
    return any(os.path.lexists(path / name) for name in COURSE_PRIVATE)


@functools.cache
def cuda_library_dirs() -> tuple[Path, ...]:
    """The folders of the CUDA driver's and toolkit's libraries, as the dynamic linker's cache names them."""
    ldconfig = next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None)
    if ldconfig is None:
        return ()
    try:
        listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = {Path(os.path.dirname(m.group(2))) for line in listing.splitlines() if (m := CUDA_LIBRARIES.match(line))}
    return tuple(sorted(p for p in found if p.is_dir()))


def visible(*, gpu: bool, courses: Iterable[Path], env: Mapping[str, str], tools: Iterable[str] = ()) -> View:
    """The allowlist of a sandbox (see the module docstring); ``courses`` are folders that must stay unseen,
    ``env`` the environment set inside (its ``PYTHONPATH`` and ``LD_LIBRARY_PATH`` count), ``tools`` the binaries
    a child runs under."""
    courses = [c for c in (resolved(p) for p in courses) if c]
    links, binds, empty = [], [], []
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            links.append((os.readlink(link), link))
        elif os.path.isdir(link):
            binds.append((link, link))
    binds += [(d, d) for d in SYSTEM_DIRS if os.path.isdir(d)]
    empty += [d for d in SYSTEM_HIDDEN if os.path.isdir(d) and not os.path.islink(d)]
    for name in ETC_FILES:
        path = f"/etc/{name}"
        if os.path.exists(path):
            binds.append((path, path))

    def shown(path: Path) -> bool:
        """Visible through the system's binds and links already (as named, not resolved)."""
        in_system = any(within(path, Path(d)) for d in SYSTEM_DIRS) and \
            not any(within(path, Path(h)) for h in SYSTEM_HIDDEN)
        return in_system or any(within(path, Path(link)) for _, link in links)

    wanted: list[Path] = []   # folders to bind at their own path unless the binds above show them already
    aliases: list[tuple[Path, Path]] = []   # (folder, another path it is named by)
    python_paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable), *sys.path]
    for variable in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        for value in (os.environ.get(variable, ""), env.get(variable, "")):
            python_paths += value.split(os.pathsep)
    for entry in python_paths:
        if entry and os.path.isabs(entry):
            r = resolved(entry)
            if r and r.is_dir() and not any(within(Path(own), r) for own in ("/", *PRIVATE)) \
                    and not looks_private(r, courses):
                wanted.append(r)
    package_root = settings.PACKAGE_ROOT
    wanted += [package_root / name for name in CODE_PACKAGES if (package_root / name).is_dir()]
    if gpu:
        wanted.append(Path("/sys"))
    toolkits = [*CUDA_TOOLKITS, os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    named_folders = [*(Path(t) for t in toolkits if t and os.path.isabs(t) and os.path.isdir(t)),
                     *cuda_library_dirs(),   # at the path the linker's cache names, and where it leads
                     *(Path(t).parent.parent if Path(t).parent.name == "bin" else Path(t).parent
                       for t in tools if os.path.isabs(t))]
    for folder in named_folders:
        root = resolved(folder)
        if root and not looks_private(root, courses):
            wanted.append(root)
            if root != folder:   # e.g. a toolkit reached through /usr/local/cuda
                aliases.append((root, folder))

    wanted = sorted({p for p in wanted if not shown(p)})
    wanted = [p for p in wanted if not any(o != p and within(p, o) for o in wanted)]
    binds += [(str(p), str(p)) for p in wanted]
    binds += [(str(root), str(folder)) for root, folder in sorted(set(aliases)) if not shown(folder)]
    data_files = sorted({Path(f).resolve() for course in {*courses, settings.ROOT, package_root}
                         for name in GRADER_FILES for f in glob.glob(str(Path(course) / "tracks" / "*" / name))})
    binds += [(str(f), str(f)) for f in data_files if not any(within(f, p) for p in wanted)]
    return View(tuple(binds), tuple(links), tuple(empty))
