"""The Triton engine's track specs: the CUDA C++ engine's spec format (`graders.cuda_engine.spec`: cases, shapes,
problem kinds, floors, targets, points) with each kernel's launch in place of a CUDA geometry.

A kernel's launch: ``block_size``, the ``BLOCK_SIZE`` constexpr it is launched with (a power of two), or
``"row"``: the grader's, the next power of two at least the shape's last size (one program covers a whole row);
and ``num_warps``. Both may be given in ``[assignment]`` as defaults. The student may choose ``num_warps``, and
``BLOCK_SIZE`` where the spec gives a number, by a literal dict handed in beside the kernel (`resolve_launch`).
The program grid follows from the shape and the block size as the problem kind's grid does for a tile of
``(BLOCK_SIZE, 1)`` (`Launch.grid`).

``block_size = "autotune"``: the kernel's own ``@triton.autotune`` configs choose its constexprs, ``num_warps``
and ``num_stages`` (`graders.triton_engine.kernel_source.read_autotune`), and no launch dict is handed in;
``autotune_tile`` names the two constexprs of a program's tile, x (columns) then y (rows), from which the grid
follows for whichever config runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graders.cuda_engine.problems import Problem, Shape
from graders.cuda_engine.spec import AssignmentSpec, KernelSpec, SpecError, parse_spec, read_toml, spec_path

ROW = "row"
AUTOTUNE = "autotune"
NUM_WARPS = (1, 2, 4, 8, 16, 32)
MAX_BLOCK_SIZE = 1 << 16
_LAUNCH_KEYS = ("block_size", "num_warps", "autotune_tile")
_NO_GEOMETRY = {"block": [1, 1], "tile": [1, 1]}   # the CUDA geometry, which a Triton kernel does not have


@dataclass(frozen=True)
class Launch:
    block_size: int | str   # a power of two, ROW or AUTOTUNE
    num_warps: int
    autotune_tile: tuple[str, str] | None = None   # AUTOTUNE's tile constexprs, x then y

    def block(self, shape: Shape) -> int:
        """``BLOCK_SIZE`` at ``shape``."""
        return next_power_of_2(shape[-1]) if self.block_size == ROW else int(self.block_size)

    def grid(self, problem: Problem, shape: Shape):
        """The program grid at ``shape``; for AUTOTUNE, a function of the running config's constexprs."""
        if self.block_size == AUTOTUNE:
            x, y = self.autotune_tile
            return lambda meta: problem.grid(shape, (meta[x], meta[y]))
        return problem.grid(shape, (self.block(shape), 1))

    def as_dict(self) -> dict:
        if self.block_size == AUTOTUNE:
            return {"BLOCK_SIZE": AUTOTUNE, "tile": list(self.autotune_tile)}
        return {"BLOCK_SIZE": self.block_size, "num_warps": self.num_warps}


@dataclass(frozen=True)
class TritonSpec:
    assignment: AssignmentSpec
    launches: dict[str, Launch]   # by kernel id

    def kernel(self, kernel_id: str) -> KernelSpec:
        return self.assignment.kernel(kernel_id)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _power_of_2(value, what: str, where: str, at_most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1) or value > at_most:
        raise SpecError(f"{where}: {what} must be a power of two from 1 to {at_most}, got {value!r}")
    return value


def _launch(raw: dict, where: str) -> Launch:
    block_size = raw.get("block_size")
    if block_size not in (ROW, AUTOTUNE):
        _power_of_2(block_size, "block_size", where, MAX_BLOCK_SIZE)
    num_warps = raw.get("num_warps")
    if num_warps not in NUM_WARPS or isinstance(num_warps, bool):
        raise SpecError(f"{where}: num_warps must be one of {NUM_WARPS}, got {num_warps!r}")
    tile = raw.get("autotune_tile")
    if (block_size == AUTOTUNE) != (tile is not None):
        raise SpecError(f"{where}: autotune_tile is given with block_size = \"{AUTOTUNE}\", and only then")
    if tile is not None and not (isinstance(tile, list) and len(tile) == 2 and all(isinstance(n, str) for n in tile)):
        raise SpecError(f"{where}: autotune_tile must be two constexpr names, x then y, got {tile!r}")
    return Launch(block_size, num_warps, tuple(tile) if tile else None)


def load_triton_spec(assignment: str | Path) -> TritonSpec:
    path = spec_path(assignment)
    data = read_toml(path, "spec")
    top = dict(data.get("assignment") or {})
    defaults = {k: top.pop(k) for k in _LAUNCH_KEYS if k in top}
    launches, kernels = {}, []
    for i, raw in enumerate(data.get("kernel") or []):
        raw = dict(raw)
        where = f"{path} [[kernel]] #{i + 1}"
        launches[raw.get("id")] = _launch(defaults | {k: raw.pop(k) for k in _LAUNCH_KEYS if k in raw}, where)
        kernels.append(raw)
    spec = parse_spec({**data, "assignment": top | _NO_GEOMETRY, "kernel": kernels}, path, engine="triton")
    return TritonSpec(spec, launches)


def resolve_launch(launch: Launch, chosen: dict | None) -> Launch:
    """The launch to grade with: the spec's, with the student's ``{"BLOCK_SIZE": ..., "num_warps": ...}`` over it
    (``BLOCK_SIZE`` only where the spec's is a number). `SpecError` says what is not allowed."""
    if chosen is None or (launch.block_size == AUTOTUNE and chosen == {}):
        return launch
    if launch.block_size == AUTOTUNE:
        raise SpecError(f"this kernel's launch is its @triton.autotune configs: no launch dict, got {chosen!r}")
    if not isinstance(chosen, dict):
        raise SpecError(f"the launch must be a dict such as {launch.as_dict()}, got {chosen!r}")
    allowed = {"num_warps"} | ({"BLOCK_SIZE"} if launch.block_size != ROW else set())
    unknown = set(chosen) - allowed
    if unknown:
        fixed = " (BLOCK_SIZE is the grader's here: the next power of two at least a row's length)" \
            if "BLOCK_SIZE" in unknown and launch.block_size == ROW else ""
        raise SpecError(f"the launch may set only {sorted(allowed)}, not {sorted(unknown)}{fixed}")
    block_size = _power_of_2(chosen["BLOCK_SIZE"], "BLOCK_SIZE", "the launch", MAX_BLOCK_SIZE) \
        if "BLOCK_SIZE" in chosen else launch.block_size
    num_warps = chosen.get("num_warps", launch.num_warps)
    if num_warps not in NUM_WARPS or isinstance(num_warps, bool):
        raise SpecError(f"the launch's num_warps must be one of {NUM_WARPS}, got {num_warps!r}")
    return Launch(block_size, num_warps)
