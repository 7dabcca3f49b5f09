"""The CUDA C++ engine's track specs: ``tracks/<name>/spec.toml``, read with tomllib.

``[assignment]`` holds defaults every kernel inherits (``check_shapes``, ``perf_shape``, ``block``, ``tile``,
``floor``, ``target``, points) plus ``time_budget_s``, ``requires_gpu`` and ``targets`` ("provisional" until
measured on the worker GPU, then "measured", with ``measured_in`` naming the records they come from, which must
describe the current measuring code: `workshop.records.measurement_code`). Each ``[[kernel]]`` gives ``id`` (the
nbgrader grade_id of its test cell), ``function`` (the ``extern "C"`` name), ``kind`` (a key of
`graders.cuda_engine.problems.kinds`, defined by a track's ``problem.py``) and may override any default. Geometry:
``block`` is the threads of a block (x, y), ``tile`` the elements one block covers (x = columns, y = rows), a
multiple of ``block`` (so each thread handles tile/block elements); the grid follows from the shape.
``student_geometry = true`` lets the student pick block and tile (the spec's are defaults). The kernel sees them
as ``BLOCK_X``, ``BLOCK_Y``, ``TILE_X``, ``TILE_Y``. ``params`` (a table of NAME = positive int, e.g.
``{ BK = 8 }``) are more compile-time parameters, ``#define``d the same way; with ``student_geometry`` the student
may set them too.

Perf curve: ``floor`` and ``target`` are ratios of the kernel's speed to the problem's baseline measured
in the same run (see `graders.cuda_engine.scoring`).

A kernel whose lesson is a hardware counter names it: ``counter = { metric = "shared_bank_conflicts",
relative_to = "tiled", at_most = 0.05 }`` earns all its speed points when its count is at most ``at_most``
times the count of the ``relative_to`` kernel's reference, none at the reference's count or above it, and in
between a share on a log scale (`graders.cuda_engine.scoring.counter_share`: 7.7x fewer where the rule asks 20x
earns 0.68 of them); both counts by Nsight Compute (`graders.cuda_engine.counters`).

compute-sanitizer (`graders.cuda_engine.sanitizer`) checks a correct kernel with the tools of ``sanitizer_tools``
(a list of ``memcheck``, ``racecheck``, ``initcheck``, ``synccheck``; default: the first three; inherited like the
geometry), once each at ``sanitize_shape`` (a shape of the kernel's kind; default: its smallest check shape of two
blocks or more, `graders.cuda_engine.sanitizer.sanitize_shape`), for a bug that shows only at some shapes. A kernel
with ``explain_crash = true`` that crashes at a check shape is launched there once more under memcheck, compiled with
its source lines, and the feedback adds memcheck's report of the faulting access (`graders.cuda_engine.grade.explained`;
the debugging track's lesson: read what the GPU worker saw).

A Hopper kernel may ask for ``arch`` (e.g. ``"sm_90a"``), ``dynamic_smem`` (bytes), ``cluster`` ([X, Y] blocks) and
``tensor_maps`` (kernel parameters after the sizes, each over an operand of the signature), and any kernel for
``libraries`` (header libraries: CUTLASS's): see
`graders.cuda_engine.extended_launch`. ``sass_requirements`` (names in `graders.cuda_engine.sass.REQUIREMENTS`
read from the SASS) are added to the problem's own: a correct kernel that misses one is ``unmet`` and keeps its
correctness points only (a wgmma step handed an mma.sync kernel). ``persistent = true`` launches one block
an SM (`graders.cuda_engine.extended_launch.persistent_grid`), the kernel walking the tiles itself. With
``warp_specialised = true`` the block's warps take roles (a producer, consumers) rather than a share of the
tile each, so the tile need not be a multiple of the block.
"""
from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from graders import settings
from graders.cuda_engine.extended_launch import LaunchFeatures, cluster_problem, parse_features
from graders.cuda_engine.problems import kinds, problem

MAX_THREADS = 1024

_ASSIGNMENT_KEYS = {"name", "engine", "requires_gpu", "time_budget_s", "targets", "measured_in"}
_INHERITED = {"check_shapes", "perf_shape", "block", "tile", "warp_specialised", "persistent", "floor", "target",
              "points_correct", "points_perf", "student_geometry", "params", "sanitizer_tools", "arch", "dynamic_smem",
              "cluster", "tensor_maps", "sass_requirements", "libraries"}
_KERNEL_KEYS = {"id", "function", "kind", "reference", "counter", "sanitize_shape", "explain_crash"} | _INHERITED
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")   # compute-sanitizer's tools
DEFAULT_SANITIZER_TOOLS = SANITIZER_TOOLS[:3]
_COUNTER_KEYS = {"metric", "relative_to", "at_most"}


class SpecError(ValueError):
    """A spec file (or a geometry asked for) is invalid; the message says where and why."""


@dataclass(frozen=True)
class Geometry:
    block: tuple[int, int]
    tile: tuple[int, int]
    params: tuple[tuple[str, int], ...] = ()   # more #defines (template parameters), sorted by name

    def defines(self) -> dict[str, int]:
        return {"BLOCK_X": self.block[0], "BLOCK_Y": self.block[1], "TILE_X": self.tile[0],
                "TILE_Y": self.tile[1], **dict(self.params)}

    @property
    def elements_per_thread(self) -> int:
        return (self.tile[0] // self.block[0]) * (self.tile[1] // self.block[1])


@dataclass(frozen=True)
class CounterRule:
    """The speed points scaled by the kernel's ``metric`` against the ``relative_to`` reference's: all of them at
    most ``at_most`` x the reference's count, none at or above it, a log-scale share between
    (`graders.cuda_engine.scoring.counter_share`). Short of the bound the kernel's status is ``unmet`` (the rule
    is the step's lesson, not yet learned), whatever share it earns; at ``at_most`` >= 1 the rule is all or
    nothing."""

    metric: str          # a name in `graders.cuda_engine.counters.METRICS`
    relative_to: str     # a kernel id of the same spec: its reference is profiled beside the student's kernel
    at_most: float


@dataclass(frozen=True)
class KernelSpec:
    id: str
    function: str
    kind: str
    geometry: Geometry
    student_geometry: bool
    check_shapes: tuple[tuple[int, ...], ...]
    perf_shape: tuple[int, ...]
    points_correct: float
    points_perf: float
    floor: float
    target: float
    reference: Path | None
    counter: CounterRule | None = None
    sanitizer_tools: tuple[str, ...] = DEFAULT_SANITIZER_TOOLS
    sanitize_shape: tuple[int, ...] | None = None   # None: `graders.cuda_engine.sanitizer.sanitize_shape` picks
    explain_crash: bool = False   # a crash at a check shape: memcheck's report of it in the feedback
    launch: LaunchFeatures = LaunchFeatures()   # sm_90a, dynamic shared memory, clusters, tensor maps
    sass_requirements: tuple[str, ...] = ()     # beyond the problem's own
    warp_specialised: bool = False              # warps take roles: the tile need not be a multiple of the block

    @property
    def points(self) -> float:
        return self.points_correct + self.points_perf


@dataclass(frozen=True)
class AssignmentSpec:
    name: str
    path: Path
    requires_gpu: bool
    time_budget_s: float
    targets: str
    kernels: dict[str, KernelSpec]
    measured_in: tuple[str, ...] = ()   # with targets = "measured": the records (repo-relative) they come from

    def kernel(self, kernel_id: str) -> KernelSpec:
        try:
            return self.kernels[kernel_id]
        except KeyError:
            raise SpecError(f"{self.path}: no kernel {kernel_id!r}; kernels: {', '.join(self.kernels)}") from None


def spec_path(assignment: str | Path) -> Path:
    """A spec file given directly, or the track's: ``tracks/<name>/spec.toml`` (see `graders.settings`)."""
    path = Path(assignment)
    if path.suffix == ".toml":
        return path
    return settings.TRACKS / str(assignment) / "spec.toml"


def read_toml(path: Path, what: str) -> dict:
    """A TOML file's contents, or `SpecError` saying it is missing or malformed."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"no {what} file at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None


def load_spec(assignment: str | Path) -> AssignmentSpec:
    path = spec_path(assignment)
    return parse_spec(read_toml(path, "spec"), path)


def parse_spec(data: dict, path: Path, engine: str = "cuda") -> AssignmentSpec:
    top = data.get("assignment")
    if not isinstance(top, dict):
        raise SpecError(f"{path}: needs an [assignment] table")
    _no_unknown(top, _ASSIGNMENT_KEYS | _INHERITED, f"{path} [assignment]")
    kernels_raw = data.get("kernel")
    if not isinstance(kernels_raw, list) or not kernels_raw:
        raise SpecError(f"{path}: needs at least one [[kernel]] table")
    unknown_tables = set(data) - {"assignment", "kernel"}
    if unknown_tables:
        raise SpecError(f"{path}: unknown table(s) {sorted(unknown_tables)}")
    targets = top.get("targets", "provisional")
    if targets not in ("provisional", "measured"):
        raise SpecError(f"{path} [assignment]: targets must be 'provisional' or 'measured', not {targets!r}")
    measured_in = top.get("measured_in", [])
    if not isinstance(measured_in, list) or not all(isinstance(r, str) for r in measured_in):
        raise SpecError(f"{path} [assignment]: measured_in must be a list of record paths")
    if (targets == "measured") != bool(measured_in):
        raise SpecError(f"{path} [assignment]: targets = \"measured\" needs measured_in, the records they come "
                        "from (written by `workshop targets ... --write`), and only then")
    kernels: dict[str, KernelSpec] = {}
    for i, raw in enumerate(kernels_raw):
        where = f"{path} [[kernel]] #{i + 1}" + (f" ({raw['id']})" if isinstance(raw.get("id"), str) else "")
        kernel = _parse_kernel({k: v for k, v in top.items() if k in _INHERITED} | raw, path, where, engine)
        if kernel.id in kernels:
            raise SpecError(f"{where}: duplicate id {kernel.id!r}")
        kernels[kernel.id] = kernel
    for kernel in kernels.values():
        if kernel.counter and kernels.get(kernel.counter.relative_to, kernel).reference is None:
            raise SpecError(f"{path} [[kernel]] {kernel.id}: counter.relative_to must name another kernel with a "
                            f"reference, got {kernel.counter.relative_to!r}")
    return AssignmentSpec(
        name=_typed(top, "name", str, f"{path} [assignment]"),
        path=path,
        requires_gpu=_typed(top, "requires_gpu", bool, f"{path} [assignment]", default=True),
        time_budget_s=float(_number(top, "time_budget_s", f"{path} [assignment]", default=10.0, positive=True)),
        targets=targets,
        kernels=kernels,
        measured_in=tuple(measured_in),
    )


def _parse_kernel(raw: dict, path: Path, where: str, engine: str) -> KernelSpec:
    _no_unknown(raw, _KERNEL_KEYS, where)
    kind = _typed(raw, "kind", str, where)
    if kind not in kinds(engine):
        raise SpecError(f"{where}: unknown kind {kind!r}; known kinds: {', '.join(kinds(engine))}")
    rank = len(problem(kind, engine).shape_names)
    check_shapes = raw.get("check_shapes")
    if not isinstance(check_shapes, list) or not check_shapes:
        raise SpecError(f"{where}: check_shapes must be a non-empty list of shapes")
    floor = _number(raw, "floor", where)
    target = _number(raw, "target", where, positive=True)
    if not 0 <= floor < target:
        raise SpecError(f"{where}: need 0 <= floor < target, got floor={floor}, target={target}")
    reference = raw.get("reference")
    definition = problem(kind, engine)
    try:
        launch = parse_features(raw, definition.signature)
    except ValueError as exc:
        raise SpecError(f"{where}: {exc}") from None
    warp_specialised = _typed(raw, "warp_specialised", bool, where, default=False)
    geometry = make_geometry(_pair(raw, "block", where), _pair(raw, "tile", where), where,
                             _params(raw.get("params", {}), where), warp_specialised)
    shapes = [_shape(s, rank, f"{where} check_shapes") for s in check_shapes]
    tiled = launch.cluster and not launch.persistent   # a persistent grid is built of whole clusters
    for shape in [*shapes, _shape(raw.get("perf_shape"), rank, f"{where} perf_shape")] if tiled else []:
        found = cluster_problem(launch.cluster, definition.grid(shape, geometry.tile), "x".join(map(str, shape)))
        if found:
            raise SpecError(f"{where}: {found}")
    return KernelSpec(
        id=_typed(raw, "id", str, where),
        function=_typed(raw, "function", str, where),
        kind=kind,
        geometry=geometry,
        student_geometry=_typed(raw, "student_geometry", bool, where, default=False),
        check_shapes=tuple(shapes),
        perf_shape=_shape(raw.get("perf_shape"), rank, f"{where} perf_shape"),
        points_correct=float(_number(raw, "points_correct", where)),
        points_perf=float(_number(raw, "points_perf", where)),
        floor=float(floor),
        target=float(target),
        reference=(path.parent / _typed(raw, "reference", str, where)).resolve() if reference is not None else None,
        counter=_counter(raw["counter"], f"{where} counter") if "counter" in raw else None,
        sanitizer_tools=_tools(raw.get("sanitizer_tools", list(DEFAULT_SANITIZER_TOOLS)), where),
        sanitize_shape=_shape(raw["sanitize_shape"], rank, f"{where} sanitize_shape")
        if "sanitize_shape" in raw else None,
        explain_crash=_typed(raw, "explain_crash", bool, where, default=False),
        launch=launch,
        sass_requirements=_sass_requirements(raw.get("sass_requirements", []), where),
        warp_specialised=warp_specialised,
    )


def _sass_requirements(value, where: str) -> tuple[str, ...]:
    """Names of `graders.cuda_engine.sass.REQUIREMENTS` that the grading child reads from the SASS."""
    if value == []:
        return ()
    from graders.cuda_engine.sass import READS_PTX, REQUIREMENTS
    allowed = sorted(set(REQUIREMENTS) - READS_PTX)
    if not isinstance(value, list) or any(r not in allowed for r in value):
        raise SpecError(f"{where}: sass_requirements must be a list of names among {allowed}, got {value!r}")
    return tuple(value)


def _tools(value, where: str) -> tuple[str, ...]:
    """A list of compute-sanitizer tools, each once, in `SANITIZER_TOOLS`' order."""
    if (not isinstance(value, list) or not all(isinstance(t, str) for t in value)
            or set(value) - set(SANITIZER_TOOLS) or len(set(value)) != len(value)):
        raise SpecError(f"{where}: sanitizer_tools must be a list of distinct tools among {list(SANITIZER_TOOLS)}, "
                        f"got {value!r}")
    return tuple(t for t in SANITIZER_TOOLS if t in value)


def _counter(raw, where: str) -> CounterRule:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: must be a table {{ metric = ..., relative_to = ..., at_most = ... }}")
    _no_unknown(raw, _COUNTER_KEYS, where)
    return CounterRule(_typed(raw, "metric", str, where), _typed(raw, "relative_to", str, where),
                       float(_number(raw, "at_most", where, positive=True)))


def make_geometry(block: tuple[int, int], tile: tuple[int, int], where: str = "geometry",
                  params: dict[str, int] | None = None, warp_specialised: bool = False) -> Geometry:
    """The launch geometry; the tile a multiple of the block unless the block's warps take roles
    (``warp_specialised``)."""
    if min(block) < 1 or min(tile) < 1:
        raise SpecError(f"{where}: block and tile sizes must be positive, got block={block}, tile={tile}")
    if block[0] * block[1] > MAX_THREADS:
        raise SpecError(f"{where}: a block of {block[0]}x{block[1]} threads is more than {MAX_THREADS}")
    if not warp_specialised and (tile[0] % block[0] or tile[1] % block[1]):
        raise SpecError(f"{where}: tile {tile[0]}x{tile[1]} must be a multiple of block {block[0]}x{block[1]}")
    return Geometry(block, tile, tuple(sorted(_params(params or {}, where).items())))


_PARAM_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_GEOMETRY_NAMES = {"BLOCK_X", "BLOCK_Y", "TILE_X", "TILE_Y"}


def _params(value, where: str) -> dict[str, int]:
    """A table of compile-time parameters: upper-case NAME = positive int, not a geometry name."""
    if not isinstance(value, dict):
        raise SpecError(f"{where}: params must be a table of NAME = int, got {value!r}")
    for name, v in value.items():
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name) or name in _GEOMETRY_NAMES:
            raise SpecError(f"{where}: parameter name {name!r} must be upper case (A-Z, 0-9, _) and not one of "
                            f"{sorted(_GEOMETRY_NAMES)}")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SpecError(f"{where}: parameter {name} must be a positive int, got {v!r}")
    return dict(value)


def resolve_geometry(kernel: KernelSpec, block=None, tile=None, params=None) -> Geometry:
    """The geometry to launch with: the spec's, or the student's where the spec allows it.

    The student's ``params`` are merged over the spec's (the spec's names only)."""
    if block is None and tile is None and params is None:
        return kernel.geometry
    if not kernel.student_geometry:
        raise SpecError(f"kernel {kernel.id!r} has a fixed launch geometry (block {kernel.geometry.block}, "
                        f"tile {kernel.geometry.tile}" + (f", params {dict(kernel.geometry.params)}"
                                                          if kernel.geometry.params else "")
                        + "); don't pass block, tile or params")
    spec_params = dict(kernel.geometry.params)
    if params is not None:
        if not isinstance(params, dict):
            raise SpecError(f"params must be a dict of NAME: int, got {params!r}")
        unknown = set(params) - set(spec_params)
        if unknown:
            raise SpecError(f"kernel {kernel.id!r} has no parameter(s) {sorted(unknown)}; "
                            f"its parameters: {sorted(spec_params) or 'none'}")
        spec_params |= params
    block = tuple(block) if block is not None else kernel.geometry.block
    tile = tuple(tile) if tile is not None else kernel.geometry.tile
    if len(block) != 2 or len(tile) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                                    for v in (*block, *tile)):
        raise SpecError(f"block and tile must be pairs of ints (x, y), got block={block}, tile={tile}")
    return make_geometry(block, tile, f"kernel {kernel.id!r}", spec_params, kernel.warp_specialised)


def _no_unknown(table: dict, allowed: set[str], where: str) -> None:
    unknown = set(table) - allowed
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")


def _typed(table: dict, key: str, kind: type, where: str, default=None):
    value = table.get(key, default)
    if value is None:
        raise SpecError(f"{where}: missing {key!r}")
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise SpecError(f"{where}: {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _number(table: dict, key: str, where: str, default=None, positive: bool = False) -> float:
    value = table.get(key, default)
    if value is None:
        raise SpecError(f"{where}: missing {key!r}")
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0
            or (positive and value == 0)):
        raise SpecError(f"{where}: {key!r} must be a {'positive' if positive else 'non-negative'} number, "
                        f"got {value!r}")
    return value


def _pair(table: dict, key: str, where: str) -> tuple[int, int]:
    return _shape(table.get(key), 2, f"{where} {key}")


def _shape(value, rank: int, where: str) -> tuple[int, ...]:
    if (not isinstance(value, list) or len(value) != rank
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        raise SpecError(f"{where}: expected a list of {rank} positive ints, got {value!r}")
    return tuple(value)
