"""Cell files: Python files split into notebook cells by ``# %% <grade_id>`` lines (as in solutions/)."""
from __future__ import annotations

import linecache
import re
from pathlib import Path

_MARKER = re.compile(r"^# %% (\S+)\s*$", re.MULTILINE)
_SOLUTION_BLOCK = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", re.MULTILINE)


def read_cells(path: Path) -> dict[str, str]:
    """The cells of a cell file, by grade_id, in file order; text before the first marker is dropped."""
    parts = _MARKER.split(Path(path).read_text())
    return {grade_id: body.strip("\n") for grade_id, body in zip(parts[1::2], parts[2::2])}


def strip_solution_markers(source: str) -> str:
    """A reference cell as a student who solved it would have written it."""
    return _SOLUTION_BLOCK.sub("", source)


def exec_cell(source: str, namespace: dict, filename: str) -> None:
    """Run a cell's source in ``namespace`` the way IPython does: its text stays readable by ``inspect``."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)

