"""The processes on this machine whose command line carries a marker (what a test started, or what outlived it)."""
from __future__ import annotations

from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """The pids of the processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found
