"""Tracks: one folder per assignment, ``tracks/<name>/``, and nothing about a track anywhere else.

A track folder holds:

- ``spec.toml``: what is graded and how (``[assignment]``: ``name`` = the folder's name, ``engine``: ``numba``,
  ``cuda``, ``triton``, ``quiz``, ``roofline``, ``model`` or ``tilelang``; cases, seeds, tolerances, targets, points; the engine's
  docstring lists the keys);
- ``problem.py``, when the track brings problems of its own: numba puzzles (``PUZZLES``), CUDA problem
  kinds (``PROBLEMS``, registered with the CUDA engine from here) or a quiz's questions (``QUESTIONS``; its
  answers are in ``key.py``, which is none of the grader files: `graders.quiz_engine`);
- ``notebook.py``: ``build() -> NotebookNode``, the nbgrader source notebook (written to
  ``assignments/<name>/<name>.ipynb`` by ``workshop build``; a test fails when the committed one is stale);
- ``solutions/``: the reference solution, and in ``solutions/wrong/`` known-wrong ones, each with the points
  it must get on an ``expect:`` line (`expected_points`; a CUDA or Triton one also the grading statuses it may
  end in, `expected_statuses`). Solutions never enter a release or a sandbox.

Only ``spec.toml``, ``structure.toml`` and ``problem.py`` are visible to sandboxed grading children
(`GRADER_FILES`).
"""
from __future__ import annotations

import functools
import importlib.util
import math
import operator
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from graders import settings

GRADER_FILES = ("spec.toml", "structure.toml", "problem.py")
ENGINES = ("numba", "cuda", "triton", "quiz", "roofline", "model", "tilelang")
CPU_ENGINES = ("numba", "model")   # grade on this machine's CPU where WORKSHOP_TARGET=sim (tests without a GPU)
_EXPECT = re.compile(r"^(?:#|//) expect: (.*)$", re.MULTILINE)
_STATUS = re.compile(r"^(?:#|//) status: (.*)$", re.MULTILINE)
_BOUND = re.compile(r"^(\w+)(<=|>=|=|<|>)(\d+(?:\.\d+)?)$")
_COMPARE = {"=": lambda a, b: math.isclose(a, b, abs_tol=1e-9), "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


class TrackError(ValueError):
    """A track folder is missing a part or is malformed; the message says which."""


@dataclass(frozen=True)
class Track:
    name: str
    folder: Path
    engine: str
    assignment: dict   # the spec's ``[assignment]`` table

    @property
    def requires_gpu(self) -> bool:
        """``[assignment] requires_gpu`` (default: a CUDA track does); autograde refuses to start without one.
        ``WORKSHOP_TARGET=sim`` lifts it for an engine that grades on the CPU there (`CPU_ENGINES`)."""
        needed = bool(self.assignment.get("requires_gpu", self.engine == "cuda"))
        return needed and not (self.engine in CPU_ENGINES and settings.forced_target() == "sim")

    @property
    def spec_path(self) -> Path:
        return self.folder / "spec.toml"

    @property
    def solutions(self) -> Path:
        return self.folder / "solutions"

    @property
    def notebook_path(self) -> Path:
        """The nbgrader source notebook built from this track."""
        return settings.ASSIGNMENTS / self.name / f"{self.name}.ipynb"

    def wrong_solutions(self) -> list[Path]:
        folder = self.solutions / "wrong"
        return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []

    def problem_module(self) -> ModuleType | None:
        """The track's ``problem.py``, imported once, or None when the track brings no problems."""
        return _import(self.folder / "problem.py", f"tracks.{self.name}.problem")

    def build_notebook(self):
        """The source notebook as the track's ``notebook.py`` builds it (an nbformat NotebookNode)."""
        module = _import(self.folder / "notebook.py", f"tracks.{self.name}.notebook")
        if module is None:
            raise TrackError(f"{self.folder}: no notebook.py")
        return module.build()


@dataclass(frozen=True)
class Expectation:
    """The points one test cell must get: exactly a value (``("=", 0.0),``), or within bounds where they
    depend on the GPU's speed (``(">", 1.0), ("<", 3.0)``: a correct kernel between floor and target)."""
    bounds: tuple[tuple[str, float], ...]

    def matches(self, points: float) -> bool:
        return all(_COMPARE[op](points, value) for op, value in self.bounds)

    def __str__(self) -> str:
        return " and ".join(f"{op} {value:g}" for op, value in self.bounds)


def expected_points(path: Path) -> dict[str, Expectation]:
    """What a known-wrong solution must score, by test cell grade_id, from its ``expect:`` line:
    ``# expect: zip_correct=0 zip_limits=0`` in a cell file, ``// expect: tiled_score=1`` in CUDA source.
    Each item is GRADE_ID, one of ``= < <= > >=``, and points; a cell named twice gets both bounds
    (``warptiling_score>1 warptiling_score<3``)."""
    match = _EXPECT.search(Path(path).read_text())
    if not match:
        raise TrackError(f"{path} has no 'expect:' line")
    bounds: dict[str, tuple[tuple[str, float], ...]] = {}
    for item in match.group(1).split():
        parsed = _BOUND.match(item)
        if not parsed:
            raise TrackError(f"{path}: {item!r} in the expect: line is not GRADE_ID=POINTS (or <, <=, >, >=)")
        grade_id, op, value = parsed.groups()
        bounds[grade_id] = bounds.get(grade_id, ()) + ((op, float(value)),)
    return {grade_id: Expectation(b) for grade_id, b in bounds.items()}


def expected_statuses(path: Path) -> tuple[str, ...]:
    """The grading statuses a known-wrong CUDA or Triton solution may end in, from its ``// status:`` (or
    ``# status:``) line (``// status: incorrect|oob_write``; ``ok`` for a correct one); () when it has none."""
    match = _STATUS.search(Path(path).read_text())
    return tuple(match.group(1).split("|")) if match else ()


def unmet_expectation(path: Path, status: str, points: float) -> str:
    """'' when a known-wrong CUDA solution's grading ended in a status its ``status:`` line allows, with the
    points its ``expect:`` line gives its kernel's score cell; else what differs."""
    expected = expected_points(path)[f"{graded_kernel(path)}_score"]
    if status not in expected_statuses(path):
        return f"{path.name}: status {status}, expected one of {expected_statuses(path)}"
    return "" if expected.matches(points) else f"{path.name}: {points:g} points, expected {expected}"


def graded_kernel(path: Path) -> str:
    """The kernel a known-wrong CUDA solution is handed in as: the KERNEL of the one ``KERNEL_score`` cell on
    its ``expect:`` line."""
    kernels = [grade_id.removesuffix("_score") for grade_id in expected_points(path) if grade_id.endswith("_score")]
    if len(kernels) != 1:
        raise TrackError(f"{path}: its expect: line must name exactly one KERNEL_score cell, not {len(kernels)}")
    return kernels[0]


@functools.cache
def _import(path: Path, name: str) -> ModuleType | None:
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _read(folder: Path) -> Track:
    spec = folder / "spec.toml"
    try:
        top = tomllib.loads(spec.read_text()).get("assignment", {})
    except FileNotFoundError:
        raise TrackError(f"{folder}: a track needs a spec.toml") from None
    engine = top.get("engine")
    if engine not in ENGINES:
        raise TrackError(f"{spec} [assignment]: engine must be one of {ENGINES}, got {engine!r}")
    if top.get("name") != folder.name:
        raise TrackError(f"{spec} [assignment]: name must be the folder's name {folder.name!r}")
    return Track(folder.name, folder, engine, top)


def all_tracks(root: Path | None = None) -> list[Track]:
    """Every track folder under ``tracks/``, by name."""
    base = root or settings.TRACKS
    return [_read(f) for f in sorted(base.iterdir()) if f.is_dir() and not f.name.startswith((".", "_"))]


def find(name: str) -> Track | None:
    """The track named ``name``, or None when there is no such folder (an assignment that is not a track)."""
    return _read(settings.TRACKS / name) if (settings.TRACKS / name).is_dir() else None


def get(name: str) -> Track:
    track = find(name)
    if track is None:
        known = ", ".join(t.name for t in all_tracks())
        raise TrackError(f"no track {name!r} (no folder {settings.TRACKS / name}); tracks: {known}")
    return track


def problem_modules(engine: str) -> list[tuple[Track, ModuleType]]:
    """Each track of ``engine`` that brings problems, with its imported ``problem.py``."""
    found = [(t, t.problem_module()) for t in all_tracks() if t.engine == engine]
    return [(track, module) for track, module in found if module is not None]
