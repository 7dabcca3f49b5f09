"""``workshop targets``: a track's speed targets from measured numbers: a CUDA C++, Triton or TileLang track's
kernels, or a model track's problems (the spec's ``engine`` says which reader reads it, `load_timed_spec`).

A benchmark record holds each reference kernel's measured speed ratio (kernel / baseline throughput, as
graded): ``kernels.<id>.ratio`` in a ``transpose-<date>.json`` of ``python -m benchmarks.transpose_bench``,
``sizes.<perf_shape>.kernels.<id>.ratio`` in a GEMM worklog record (`workshop.records`); a model track's
problem's ratio is its reference's speed-up over ``torch.compile``, at the problem's ``sizes``. Each kernel's
target becomes ``fraction`` x its ratio (the lowest ratio when several records are given), rounded up to three
significant digits: at least that fraction, and at most 1% above it, so that its reference earns full marks
run after run. With ``write``, only the ``target = ...`` lines of the spec's ``[[kernel]]`` (or ``[[problem]]``)
tables whose value changes are rewritten (a kernel without one gets one after its ``id``), comments and all else kept,
and ``[assignment]`` says ``targets = "measured"`` and ``measured_in`` names the records. A record must carry
the track's current `workshop.records.measurement_code`: targets are never set from numbers the current code
did not measure.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from graders.cuda_engine.spec import AssignmentSpec, load_spec, read_toml
from graders.model_engine.spec import ModelSpec, load_model_spec
from graders.settings import PACKAGE_ROOT
from graders.tilelang_engine.spec import load_tilelang_spec
from graders.triton_engine.spec import load_triton_spec
from workshop.records import measurement_code

_TABLE = re.compile(r"^\s*\[\[?\s*[A-Za-z_][\w.-]*\s*\]\]?\s*(#.*)?$")   # a table header line
_ID = re.compile(r'^\s*id\s*=\s*"([^"]+)"')
_TARGET = re.compile(r"^(\s*target\s*=\s*)([^#\n]*?)(\s*(?:#.*)?)$")
_TARGETS = re.compile(r"^(\s*targets\s*=\s*)[^#\n]*?(\s*(?:#.*)?)$")
_MEASURED_IN = re.compile(r"^\s*measured_in\s*=")


class TargetsError(ValueError):
    """A record holds no usable ratios for the spec, or a new target would not be above its floor."""


@dataclass(frozen=True)
class Goal:
    """A kernel's (or a model problem's) speed target, its floor, and where it is measured: a kernel's perf_shape
    (a tuple), a problem's sizes (a dict)."""
    target: float
    floor: float
    measured_at: tuple | dict


@dataclass(frozen=True)
class TimedSpec:
    """What `workshop targets` reads of a spec, whichever engine's: its goals by id, in ``table`` tables."""
    name: str
    path: Path
    targets: str
    measured_in: tuple[str, ...]
    table: str   # "kernel", or a model track's "problem"
    goals: dict[str, Goal]


def timed(spec: AssignmentSpec | ModelSpec) -> TimedSpec:
    """The goals of an engine's spec: a kernel's at its perf_shape, a model problem's at its sizes."""
    if isinstance(spec, ModelSpec):
        goals = {pid: Goal(p.target, p.floor, p.sizes) for pid, p in spec.problems.items()}
        return TimedSpec(spec.name, spec.path, spec.targets, spec.measured_in, "problem", goals)
    goals = {kid: Goal(k.target, k.floor, k.perf_shape) for kid, k in spec.kernels.items()}
    return TimedSpec(spec.name, spec.path, spec.targets, spec.measured_in, "kernel", goals)


# the engines whose kernels are timed against a baseline, and how each reads its spec
SPEC_READERS = {"cuda": load_spec, "triton": lambda path: load_triton_spec(path).assignment,
                "tilelang": load_tilelang_spec, "model": load_model_spec}


def read_timed_spec(path: Path) -> AssignmentSpec | ModelSpec:
    """The spec at ``path``, read by its engine's reader (``[assignment] engine``, CUDA C++ if none)."""
    engine = (read_toml(Path(path), "spec").get("assignment") or {}).get("engine", "cuda")
    if engine not in SPEC_READERS:
        raise TargetsError(f"{path}: a {engine} track has no speed targets (only {', '.join(SPEC_READERS)} tracks)")
    return SPEC_READERS[engine](path)


def load_timed_spec(path: Path) -> TimedSpec:
    """`timed` of the spec at ``path``, read by its engine's reader."""
    return timed(read_timed_spec(path))


def measured_ratios(record: dict, spec: TimedSpec) -> dict[str, float]:
    """Each goal's measured ratio in ``record``, for the goals of ``spec`` it measured where they are measured."""
    rows = record.get("kernels")
    if rows is None:   # a GEMM worklog record: one entry per size
        sizes = record.get("sizes", {})
        shapes = [goal.measured_at for goal in spec.goals.values()]
        rows = next((sizes[label] for label in sizes if _shape(label) in shapes), {}).get("kernels", {})
    ratios = {}
    for kid, row in rows.items():
        if kid in spec.goals and "ratio" in row:
            wanted = spec.goals[kid].measured_at
            found = row.get("sizes") if isinstance(wanted, dict) else tuple(row.get("shape") or wanted)
            if found != wanted:
                raise TargetsError(f"{kid} was measured at {found}, not at {wanted}")
            ratios[kid] = float(row["ratio"])
    return ratios


def lowest_ratios(records: list[Path], spec: TimedSpec) -> dict[str, float]:
    """The lowest ratio each goal of ``spec`` reached across ``records`` (JSON files)."""
    lowest: dict[str, float] = {}
    for path in records:
        found = measured_ratios(json.loads(Path(path).read_text()), spec)
        if not found:
            raise TargetsError(f"{path} holds no measured ratio of a kernel of {spec.path}")
        for kid, ratio in found.items():
            lowest[kid] = min(ratio, lowest.get(kid, ratio))
    return lowest


def new_targets(ratios: dict[str, float], fraction: float) -> dict[str, float]:
    return {kid: _up_to_three_digits(fraction * ratio) for kid, ratio in ratios.items()}


def _up_to_three_digits(value: float) -> float:
    """``value`` rounded up to three significant digits (0.12513 -> 0.126), at most 1% more."""
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    return float(f"{math.ceil(round(value / step, 6)) * step:.3g}")


def rewrite_spec(text: str, targets: dict[str, float], records: list[str], every_kernel: bool = True,
                 table: str = "kernel") -> str:
    """The spec's text with each ``[[table]]`` table's target set from ``targets`` (by its id), and, when
    ``every_kernel`` has one, ``targets = "measured"`` and ``measured_in = records`` in ``[assignment]`` (a spec
    with a kernel left unmeasured stays as it was there); every other line as it was."""
    lines = text.splitlines(keepends=True)
    tables = [i for i, line in enumerate(lines) if _TABLE.match(line)] + [len(lines)]
    out = lines[:tables[0]]
    for start, end in zip(tables, tables[1:]):
        block = lines[start:end]
        header = block[0].strip()
        if header == "[assignment]" and every_kernel:
            block = _set_measured(block, records)
        elif header == f"[[{table}]]":
            kid = next((m.group(1) for m in map(_ID.match, block) if m), None)
            if kid in targets:
                block = _set_target(block, targets[kid])
        out += block
    return "".join(out)


def _set_target(block: list[str], target: float) -> list[str]:
    for i, line in enumerate(block):
        match = _TARGET.match(line)
        if match and float(match.group(2)) == target:
            return block
        if match:
            return block[:i] + [_TARGET.sub(rf"\g<1>{target:g}\g<3>", line)] + block[i + 1:]
    at = next(i for i, line in enumerate(block) if _ID.match(line)) + 1
    return block[:at] + [f"target = {target:g}\n"] + block[at:]


def _set_measured(block: list[str], records: list[str]) -> list[str]:
    block = [line for line in block if not _MEASURED_IN.match(line)]
    measured = ['targets = "measured"\n', f"measured_in = {json.dumps(records)}\n"]
    for i, line in enumerate(block):
        if _TARGETS.match(line):
            return block[:i] + [_TARGETS.sub(r'\g<1>"measured"\g<2>', line), measured[1]] + block[i + 1:]
    return block[:1] + measured + block[1:]


def run(spec_path: Path, records: list[Path], fraction: float, write: bool) -> int:
    """Print each kernel's measured ratio and new target (and with ``write``, write them into the spec)."""
    spec = load_timed_spec(spec_path)
    track = spec.name
    for path in records:
        made_with = json.loads(Path(path).read_text()).get("measurement_code")
        if made_with != measurement_code(track):
            raise TargetsError(f"{path} was made with measuring code {made_with}, not the current "
                               f"{measurement_code(track)} of {track}: measure again")
    ratios = lowest_ratios(records, spec)
    targets = new_targets(ratios, fraction)
    print(f"{spec.path}: target = {fraction:g} x the measured ratio"
          f"{' (the lowest of the records)' if len(records) > 1 else ''}")
    for kid, goal in spec.goals.items():
        if kid not in targets:
            print(f"  {kid:<13} not measured: target stays {goal.target:g}")
            continue
        print(f"  {kid:<13} ratio {ratios[kid]:.4f}  target = {targets[kid]:g}  (now {goal.target:g}, floor "
              f"{goal.floor:g})")
        if targets[kid] <= goal.floor:
            raise TargetsError(f"{kid}: the new target {targets[kid]:g} is not above its floor {goal.floor:g}")
    if write:
        named = [_repo_relative(Path(p)) for p in records]
        unmeasured = [kid for kid in spec.goals if kid not in targets]
        spec.path.write_text(rewrite_spec(spec.path.read_text(), targets, named, every_kernel=not unmeasured,
                                          table=spec.table))
        load_timed_spec(spec.path)   # the edited spec still reads
        print(f"wrote {spec.path}" + (f"; its targets stay {spec.targets}: not measured {', '.join(unmeasured)}"
                                      if unmeasured else ""))
    else:
        print("(nothing written: --write sets them in the spec)")
    return 0


def _repo_relative(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(PACKAGE_ROOT).as_posix() if path.is_relative_to(PACKAGE_ROOT) else str(path)


def _shape(label: str) -> tuple[int, ...]:
    return tuple(int(n) for n in label.split("x"))

