"""The model engine's track specs: KernelBench-form problems, each a reference ``Model`` graded against a
student's ``ModelNew`` (`graders.model_engine`).

``[assignment]``: ``name``, ``engine = "model"``, ``requires_gpu``, ``targets``, ``time_budget_s``,
``trials`` (correctness trials, each on fresh inputs), ``timed_runs`` (timed calls of each model, each on fresh
inputs), ``points_correct``, ``points_perf``, ``source_repository`` and ``source_commit`` (where the problems come
from). Each ``[[problem]]``: ``id`` (a key of the track's ``problem.py`` ``SOURCES``: the problem's module text,
defining ``Model``, ``get_inputs`` and ``get_init_inputs``), ``source`` (its file in that repository), ``atol`` and
``rtol``, ``sizes`` (module globals set before ``get_inputs`` runs: the GPU's shapes) and ``cpu_sizes`` (the
CPU check's), ``floor`` and ``target`` (speed-ups over ``torch.compile`` where performance points begin and
are full), ``reference`` (the reference solution's file, under the track's folder). ``targets`` is
"provisional" until `workshop targets` sets them from records of the references' speed-ups, then "measured",
with ``measured_in`` naming those records, as in a CUDA track's spec.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from graders import settings


class ModelSpecError(ValueError):
    """A model track's spec is malformed; the message says where."""


@dataclass(frozen=True)
class ModelProblem:
    id: str
    source: str
    atol: float
    rtol: float
    sizes: dict
    cpu_sizes: dict
    floor: float
    target: float
    reference: Path

    def perf_points(self, speedup: float | None, points_perf: float) -> float:
        """Performance points at ``speedup`` over the baseline: none below ``floor``, all at ``target``."""
        if speedup is None:
            return 0.0
        return points_perf * min(1.0, max(0.0, (speedup - self.floor) / (self.target - self.floor)))


@dataclass(frozen=True)
class ModelSpec:
    name: str
    path: Path
    requires_gpu: bool
    targets: str
    time_budget_s: float
    trials: int
    timed_runs: int
    points_correct: float
    points_perf: float
    problems: dict[str, ModelProblem]
    measured_in: tuple[str, ...] = ()   # with targets = "measured": the records (repo-relative) they come from

    def problem(self, problem_id: str) -> ModelProblem:
        if problem_id not in self.problems:
            raise ModelSpecError(f"{self.path}: no problem {problem_id!r}; problems: {', '.join(self.problems)}")
        return self.problems[problem_id]

    @property
    def max_points(self) -> float:
        return self.points_correct + self.points_perf


def spec_path(assignment: str | Path) -> Path:
    path = Path(assignment)
    return path if path.suffix == ".toml" else settings.TRACKS / str(assignment) / "spec.toml"


def _sizes(raw, where: str) -> dict:
    if not isinstance(raw, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            for v in raw.values()):
        raise ModelSpecError(f"{where}: sizes must be a table of numbers, got {raw!r}")
    return dict(raw)


def load_model_spec(assignment: str | Path) -> ModelSpec:
    path = spec_path(assignment)
    data = tomllib.loads(path.read_text())
    top = data.get("assignment", {})
    problems = {}
    for i, raw in enumerate(data.get("problem") or []):
        where = f"{path} [[problem]] #{i + 1}"
        try:
            problem = ModelProblem(raw["id"], raw["source"], float(raw["atol"]), float(raw["rtol"]),
                                   _sizes(raw["sizes"], where), _sizes(raw["cpu_sizes"], where),
                                   float(raw["floor"]), float(raw["target"]), path.parent / raw["reference"])
        except KeyError as exc:
            raise ModelSpecError(f"{where}: no {exc.args[0]}") from None
        if not 0 < problem.floor < problem.target:
            raise ModelSpecError(f"{where}: 0 < floor < target, got {problem.floor} and {problem.target}")
        problems[problem.id] = problem
    if not problems:
        raise ModelSpecError(f"{path}: no [[problem]]")
    targets, measured_in = top.get("targets", "provisional"), top.get("measured_in", [])
    if targets not in ("provisional", "measured"):
        raise ModelSpecError(f"{path} [assignment]: targets must be 'provisional' or 'measured', not {targets!r}")
    if not isinstance(measured_in, list) or not all(isinstance(r, str) for r in measured_in):
        raise ModelSpecError(f"{path} [assignment]: measured_in must be a list of record paths")
    if (targets == "measured") != bool(measured_in):
        raise ModelSpecError(f"{path} [assignment]: targets = \"measured\" needs measured_in, the records they come "
                             "from (written by `workshop targets --write`), and measured_in needs it")
    return ModelSpec(top["name"], path, bool(top.get("requires_gpu", True)), targets,
                     float(top.get("time_budget_s", 60.0)), int(top.get("trials", 5)),
                     int(top.get("timed_runs", 20)), float(top.get("points_correct", 1)),
                     float(top.get("points_perf", 2)), problems, tuple(measured_in))
