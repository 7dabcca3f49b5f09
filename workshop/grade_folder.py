"""``workshop grade-folder ASSIGNMENT FOLDER``: grade kernels that did not come through nbgrader (an AI model's, a
vendor library's) with the model engine, as a student's are graded, for the class leaderboard.

``FOLDER`` holds ``<problem_id>/<author>.py``: one file per submission, the text of a ``ModelNew`` cell of that
problem of the model-engine assignment (`graders.model_engine`); ``author`` (letters, digits, ``.``, ``_``,
``-``) names it on the leaderboard. Each file is a submission like a student's: read only up to `MAX_FILE_BYTES`,
held to the engine's allowlist (`graders.model_engine.source.model_from_cell`), then checked and timed by
`graders.model_engine.grade.grade_model` in a sandboxed child. At most `MAX_FILES` entries are read from the
folder; symbolic links are not followed. Each graded file gives one record, ``TO/<problem_id>/<author>.json``: a
`gradebook.leaderboard.Entry`, the form the leaderboard reads a student's result into.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gradebook.leaderboard import MACHINE_KINDS, Entry, now
from graders.gpu import require_gpu
from graders.model_engine.grade import grade_model
from graders.model_engine.source import MAX_SOURCE_CHARS, ModelSourceError, model_from_cell
from graders.model_engine.spec import load_model_spec
from graders.result import GradeResult, Status

MAX_FILES = 200                        # entries read from the folder, all problems together
MAX_FILE_BYTES = 4 * MAX_SOURCE_CHARS  # a cell's characters, at up to four UTF-8 bytes each
AUTHOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class FolderError(ValueError):
    """The folder cannot be graded as a whole; the message says why."""


@dataclass(frozen=True)
class Found:
    """One file of the folder: the submission it is, or why it is skipped (``skipped``)."""

    path: Path
    problem: str = ""
    author: str = ""
    skipped: str = ""


def _entries(folder: Path) -> list[os.DirEntry]:
    """``folder``'s entries two levels deep, at most `MAX_FILES` of them (`FolderError` past that)."""
    found = []
    with os.scandir(folder) as top:
        for entry in top:
            found.append(entry)
            if entry.is_dir(follow_symlinks=False):
                with os.scandir(entry.path) as inner:
                    for item in inner:
                        found.append(item)
                        if len(found) > MAX_FILES:
                            break
            if len(found) > MAX_FILES:
                raise FolderError(f"{folder} holds more than {MAX_FILES} entries; grade-folder reads at most "
                                  f"{MAX_FILES} (its cap on one folder): split it")
    return found


def find(folder: Path, problems: set[str]) -> list[Found]:
    """The submissions under ``folder`` and what is skipped there, in order."""
    found = []
    for entry in sorted(_entries(folder), key=lambda e: e.path):
        path = Path(entry.path)
        parts = path.relative_to(folder).parts
        if entry.is_dir(follow_symlinks=False):
            if len(parts) == 1 and path.name not in problems:
                found.append(Found(path, skipped=f"no problem {path.name!r}; problems: {', '.join(sorted(problems))}"))
            elif len(parts) == 2:
                found.append(Found(path, skipped="a folder inside a problem's folder is not read"))
        elif len(parts) == 1:
            found.append(Found(path, skipped="not in a problem's folder (FOLDER/<problem_id>/<author>.py)"))
        elif parts[0] not in problems:
            continue   # its folder is reported
        elif entry.is_symlink() or not entry.is_file(follow_symlinks=False):
            found.append(Found(path, skipped="not a regular file (links are not followed)"))
        elif path.suffix != ".py" or not AUTHOR.fullmatch(path.stem):
            found.append(Found(path, skipped="not <author>.py, author of letters, digits, '.', '_' or '-' (at most "
                                             "64)"))
        else:
            found.append(Found(path, parts[0], path.stem))
    return found


def read_cell(path: Path) -> str:
    """The file's text, at most `MAX_FILE_BYTES` of it read (`ModelSourceError` past that, or when not UTF-8; `OSError`
    when it is a link)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as stream:   # a link put there since `find`
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ModelSourceError(f"the file holds more than {MAX_FILE_BYTES} bytes; grade-folder reads at most "
                               f"{MAX_FILE_BYTES} (the cap on a submission's file)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelSourceError(f"the file is not UTF-8 text: {exc}") from None


def grade_file(assignment: str, found: Found, kind: str, device: str, gpu: str, **options) -> Entry:
    """One submission's record: refused here when its file is over the cap or its cell outside the allowlist,
    else graded by `grade_model`."""
    spec = load_model_spec(assignment)
    try:
        source = model_from_cell(read_cell(found.path))
    except (ModelSourceError, OSError) as exc:   # OSError: unreadable, or a link now
        result = GradeResult(found.problem, Status.REFUSED, str(exc), points=0.0, max_points=spec.max_points)
    else:
        result = grade_model(assignment, found.problem, source, device=device, **options)
    return Entry(spec.name, found.problem, found.author, kind, gpu, now(), result.as_dict())


def grade_folder(assignment: str, folder: Path, to: Path, *, kind: str = "ai", device: str = "cuda",
                 log=print, **options) -> list[Path]:
    """Grade every submission under ``folder`` (see the module's docstring); returns the records written."""
    if kind not in MACHINE_KINDS:
        raise FolderError(f"kind must be one of {', '.join(MACHINE_KINDS)}, got {kind!r}")
    if not folder.is_dir():
        raise FolderError(f"{folder} is not a folder")
    spec = load_model_spec(assignment)
    gpu = require_gpu(f"Grading {folder} for {assignment}").name if device == "cuda" else device
    written = []
    for found in find(folder, set(spec.problems)):
        if found.skipped:
            log(f"{found.path}: skipped: {found.skipped}")
            continue
        entry = grade_file(assignment, found, kind, device, gpu, **options)
        record = to / found.problem / f"{found.author}.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(entry.as_json())
        written.append(record)
        result = GradeResult.from_dict(entry.result)
        speed = ", ".join(f"{s:.2f}x over {b}" for b, s in entry.timing.get("speedup", {}).items())
        log(f"{found.problem}/{found.author}: {result.status if result.ok else result.failure_line()}"
            f"{f' ({speed})' if speed else ''} -> {record}")
    return written
