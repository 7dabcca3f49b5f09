"""Structural checks: what a kernel is compiled to (SASS, spills), and the autotuning step's search.

Read from ``assignments/<name>/structure.toml`` (next to ``spec.toml``):

- ``[[check]]`` tables: ``id`` (the grade_id of its hidden test cell), ``kernel`` (a kernel id of the spec),
  ``require`` (names in `graders.cuda_engine.sass.REQUIREMENTS`) and ``points``. `check_sass` compiles the student's
  source as the grader launches it and reads the cubin with cuobjdump: no GPU needed, so these run in CI.
- ``[autotune]``: the rules for the tuned kernel. The student ships ``space`` (each of BM, BN, BK, TM, TN
  mapped to the values tried) and ``choice`` (one configuration). `check_search` checks the space and the
  choice and compiles every configuration; `score_autotuned` grades the choice like any other kernel, with
  the launch `tune_launch` derives from it; `autotune` times every configuration on a GPU.

A configuration maps to the launch as: tile = (BN, BM) (columns, rows), block = (BN / TN, BM / TM) threads,
``BK`` #defined; the kernel sees TM = TILE_Y / BLOCK_Y and TN = TILE_X / BLOCK_X.
"""
from __future__ import annotations

import itertools
import math
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from graders.cuda_engine import sass
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.spec import SpecError, load_spec, read_toml, spec_path
from graders.hidden_tests import hidden_test
from graders.result import Status
from graders.sandbox.run import run_child

TUNABLE = ("BM", "BN", "BK", "TM", "TN")
# Configurations a search space may list, valid or not (at most the rules' max_configs of them valid): the size
# is checked from the lists' lengths before the space is expanded.
MAX_SPACE = 4096


@dataclass(frozen=True)
class Check:
    id: str
    kernel: str
    require: tuple[str, ...]
    points: float


@dataclass(frozen=True)
class AutotuneRules:
    kernel: str
    check_id: str
    points: float
    min_configs: int
    max_configs: int
    max_tile: int
    max_bk: int
    max_threads: int
    min_threads: int
    max_shared_bytes: int


@dataclass(frozen=True)
class Structure:
    path: Path
    checks: dict[str, Check]
    autotune: AutotuneRules | None


def structure_path(assignment: str | Path) -> Path:
    return spec_path(assignment).with_name("structure.toml")


def load_structure(assignment: str | Path) -> Structure:
    path = structure_path(assignment)
    data = read_toml(path, "structure")
    spec = load_spec(assignment)
    checks: dict[str, Check] = {}
    for i, raw in enumerate(data.get("check", [])):
        where = f"{path} [[check]] #{i + 1}"
        if set(raw) - {"id", "kernel", "require", "points"}:
            raise SpecError(f"{where}: unknown key(s) {sorted(set(raw) - {'id', 'kernel', 'require', 'points'})}")
        try:
            check = Check(str(raw["id"]), str(raw["kernel"]), tuple(raw["require"]), float(raw["points"]))
        except KeyError as exc:
            raise SpecError(f"{where}: missing {exc.args[0]!r}") from None
        spec.kernel(check.kernel)   # raises SpecError for an unknown kernel id
        unknown = [r for r in check.require if r not in sass.REQUIREMENTS]
        if unknown:
            raise SpecError(f"{where}: unknown requirement(s) {unknown}; known: {sorted(sass.REQUIREMENTS)}")
        if check.id in checks:
            raise SpecError(f"{where}: duplicate id {check.id!r}")
        checks[check.id] = check
    rules = None
    if "autotune" in data:
        raw = data["autotune"]
        try:
            rules = AutotuneRules(**raw)
        except TypeError as exc:
            raise SpecError(f"{path} [autotune]: {exc}") from None
        if not spec.kernel(rules.kernel).student_geometry:
            raise SpecError(f"{path} [autotune]: kernel {rules.kernel!r} needs student_geometry = true in the spec")
    return Structure(path, checks, rules)


# --- SASS checks --------------------------------------------------------------------------------------

COMPILE_TIMEOUT_S = 60.0     # one compile and disassembly in the structure child, at most


def inspect_launches(assignment: str | Path, kernel_id: str, source: str, launches: list[dict], *,
                     requirements: tuple[str, ...] = (), disassemble: bool = True) -> list[tuple[list[str], dict]]:
    """Compile ``source`` at each launch (for sm_90, the workers' GPU) and check its SASS, in a sandboxed child.

    One ``(failures, facts)`` per launch; raises `CompileError` for the first launch that does not compile."""
    request = {"spec_path": str(spec_path(assignment).resolve()), "kernel_id": kernel_id, "source": source,
               "launches": [_plain_launch(launch) for launch in launches], "requirements": list(requirements),
               "disassemble": disassemble}
    child = run_child("graders.cuda_engine.structure_child", request, timeout_s=COMPILE_TIMEOUT_S * max(1, len(launches)))
    if not child.ok:
        raise CompileError(f"the compiler was {child.status}: {child.message}")
    if "error" in child.answer:
        raise CompileError(f"the structure check failed: {child.answer['error']}")
    found = []
    for launch, result in zip(launches, child.answer["results"]):
        if "compile_error" in result:
            where = f"at {_plain_launch(launch)}: " if len(launches) > 1 else ""
            raise CompileError(where + result["compile_error"])
        found.append((result["failures"], result["facts"]))
    return found


def _plain_launch(launch: dict) -> dict:
    """``block``/``tile``/``params`` as JSON values."""
    return {k: (dict(v) if k == "params" else list(v)) for k, v in launch.items() if v is not None}


def inspect(assignment: str | Path, kernel_id: str, source: str, *, requirements: tuple[str, ...] = (),
            disassemble: bool = True, **launch) -> tuple[list[str], dict]:
    """`inspect_launches` at one launch (``block``, ``tile``, ``params``; the spec's when none is given)."""
    return inspect_launches(assignment, kernel_id, source, [launch], requirements=requirements,
                            disassemble=disassemble)[0]


def describe(facts: dict) -> str:
    ops = ", ".join(f"{n} x {k}" for k, n in facts["memory_ops"].items()) or "none"
    r = facts["resources"]
    return (f"memory instructions: {ops}; {r.get('REG', '?')} registers, {r.get('STACK', 0)} B stack, "
            f"{r.get('LOCAL', 0)} B local")


@hidden_test
def check_sass(assignment: str | Path, check_id: str, source: str, **launch) -> float:
    """Points for one structural check (a hidden test cell): prints what was found, raises if unmet."""
    check = load_structure(assignment).checks[check_id]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            failures, facts = inspect(assignment, check.kernel, source, requirements=check.require, **launch)
        except CompileError as exc:
            print(f"{check_id}: {Status.COMPILE_ERROR} - {exc}")
            sys.stdout.flush()
            raise KernelFailed(f"{check_id}: {Status.COMPILE_ERROR}: {exc}") from None
    wanted = "; ".join(sass.REQUIREMENTS[r][1] for r in check.require)
    return _verdict(check_id, f" (wanted: {wanted})\n  {describe(facts)}", failures, [], check.points)


def _verdict(check_id: str, summary: str, failures: list[str], notes: list[str], points: float) -> float:
    """Print a structural check's report (``<id>: <status><summary>``, failures marked ✗, notes ·); return
    its points or raise `KernelFailed`."""
    print(f"{check_id}: {Status.UNMET if failures else Status.OK}{summary}")
    for line in failures:
        print(f"  ✗ {line}")
    for line in notes:
        print(f"  · {line}")
    print(f"  points: {0 if failures else points:g} / {points:g}")
    sys.stdout.flush()
    if failures:
        raise KernelFailed(f"{check_id}: " + "; ".join(failures))
    return points


# --- autotuning ---------------------------------------------------------------------------------------

def tune_launch(config: dict) -> dict:
    """The launch for a configuration: ``block``, ``tile`` and ``params`` keyword arguments of the grader."""
    bm, bn, bk, tm, tn = (int(config[k]) for k in TUNABLE)
    return {"block": (bn // tn, bm // tm), "tile": (bn, bm), "params": {"BK": bk}}


def choice_problem(choice, rules: AutotuneRules) -> str:
    """'' if the student's ``choice`` is a configuration the grader can launch, else why not."""
    return config_problem(choice, rules) if isinstance(choice, dict) else "the choice must be a dict"


def config_problem(config: dict, rules: AutotuneRules) -> str:
    """'' if ``config`` is a configuration the grader can launch, else why not."""
    if set(config) != set(TUNABLE):
        return f"a configuration has exactly the keys {', '.join(TUNABLE)}; got {sorted(config)}"
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in config.values()):
        return "every value must be a positive int"
    bm, bn, bk, tm, tn = (config[k] for k in TUNABLE)
    if tm % 4 or tn % 4 or bk % 4:
        return "TM, TN and BK must be multiples of 4 (float4 loads)"
    if bm % tm or bn % tn:
        return "BM must be a multiple of TM and BN of TN"
    if bm > rules.max_tile or bn > rules.max_tile or 128 % bm or 128 % bn:
        return f"BM and BN must divide 128 (at most {rules.max_tile}): the grader's M and N are multiples of 128"
    if bk > rules.max_bk or 32 % bk:
        return f"BK must divide 32 (at most {rules.max_bk}): the grader's K is a multiple of 32"
    threads = (bm // tm) * (bn // tn)
    if not rules.min_threads <= threads <= rules.max_threads:
        return f"(BM / TM) * (BN / TN) = {threads} threads; allowed {rules.min_threads} to {rules.max_threads}"
    if 4 * bk * (bm + bn) > rules.max_shared_bytes:
        return f"4 * BK * (BM + BN) = {4 * bk * (bm + bn)} B of shared memory; at most {rules.max_shared_bytes}"
    return ""


def expand_space(space: dict, limit: int = MAX_SPACE) -> list[dict]:
    """Every combination of ``space`` (each of BM, BN, BK, TM, TN mapped to a list of values, or one value).

    Their number, the product of the lists' lengths, is checked against ``limit`` before anything is expanded:
    a space of more is refused (`ValueError`) whatever it holds."""
    if not isinstance(space, dict) or set(space) != set(TUNABLE):
        raise ValueError(f"the search space maps each of {', '.join(TUNABLE)} to a list of values")
    values = [space[k] if isinstance(space[k], (list, tuple)) else [space[k]] for k in TUNABLE]
    size = math.prod(len(v) for v in values)
    if size > limit:
        raise ValueError(f"the search space lists {size} configurations ({' x '.join(str(len(v)) for v in values)} "
                         f"values of {', '.join(TUNABLE)}); the grader expands at most {limit}")
    return [dict(zip(TUNABLE, combo)) for combo in itertools.product(*values)]


def search_problems(assignment: str | Path, source: str, space: dict, choice: dict) -> tuple[list[str], list[dict]]:
    """(problems, valid configurations) of a shipped search space and choice; compiles each valid one.

    Problems starting with "note:" do not fail the check (a spill in a configuration not chosen)."""
    rules = load_structure(assignment).autotune
    try:
        configs = expand_space(space)
    except ValueError as exc:
        return [str(exc)], []
    valid = [c for c in configs if not config_problem(c, rules)]
    problems: list[str] = []
    notes: list[str] = []     # printed, not failing: spills in a configuration that was not chosen
    if len(valid) < rules.min_configs:
        examples = "; ".join(f"{c}: {config_problem(c, rules)}" for c in configs if config_problem(c, rules))[:400]
        problems.append(f"the search space has {len(valid)} valid configuration(s); at least {rules.min_configs} "
                        f"are needed" + (f" (invalid: {examples})" if examples else ""))
    if len(valid) > rules.max_configs:
        problems.append(f"the search space has {len(valid)} valid configurations; at most {rules.max_configs}")
    why = choice_problem(choice, rules)
    if why:
        problems.append(f"the choice {choice} cannot be launched: {why}")
    elif choice not in configs:
        problems.append(f"the choice {choice} is not in the search space")
    if problems:
        return problems, valid
    try:
        inspected = inspect_launches(assignment, rules.kernel, source, [tune_launch(c) for c in valid],
                                     requirements=("no_local",), disassemble=False)
    except CompileError as exc:
        return problems + [f"a configuration does not compile {exc}"], valid
    for config, (failures, _) in zip(valid, inspected):
        if failures and config == choice:
            problems.append(f"the chosen configuration {config}: {failures[0]}")
        elif failures:
            notes.append(f"note: configuration {config} spills ({failures[0].split(':')[0]})")
    return problems + notes, valid


@hidden_test
def check_search(assignment: str | Path, source: str, space: dict, choice: dict) -> float:
    """Points for the autotuning search (a hidden test cell): prints, returns points or raises."""
    rules = load_structure(assignment).autotune
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found, valid = search_problems(assignment, source, space, choice)
    problems = [p for p in found if not p.startswith("note:")]
    notes = [p for p in found if p.startswith("note:")]
    return _verdict(rules.check_id, f": {len(valid)} valid configuration(s); choice {choice}", problems, notes,
                    rules.points)


def prepare_autotuned(assignment: str | Path, source: str, choice: dict, **options) -> dict | None:
    """`score_autotuned`'s preparation: the tuned kernel's compute-sanitizer runs and counts at the student's
    chosen configuration (`graders.cuda_engine.grade.prepare`); None for a choice that cannot be launched."""
    from graders.cuda_engine.grade import prepare
    rules = load_structure(assignment).autotune
    if choice_problem(choice, rules):
        return None
    return prepare(assignment, rules.kernel, source, **tune_launch(choice), **options)


@hidden_test(alone=True, prepare=prepare_autotuned)
def score_autotuned(assignment: str | Path, source: str, choice: dict, **options) -> float:
    """The tuned kernel's correctness and speed, graded at the student's chosen configuration."""
    from graders.cuda_engine.grade import score
    rules = load_structure(assignment).autotune
    why = choice_problem(choice, rules)
    if why:
        line = f"{rules.kernel}: {Status.REFUSED}: the choice {choice} cannot be launched: {why}"
        print(line)
        sys.stdout.flush()
        raise KernelFailed(line)
    return score(assignment, rules.kernel, source, **tune_launch(choice), **options)


def autotune(assignment: str | Path, source: str, space: dict, *, budget_s: float = 0.5) -> tuple[dict, list[dict]]:
    """On a GPU: grade every valid configuration of ``space``; (the fastest correct one, a row per config).

    A space of more than the rules' ``max_configs`` valid configurations is refused before any is graded."""
    from graders.cuda_engine.grade import grade_kernel
    rules = load_structure(assignment).autotune
    configs = expand_space(space)
    valid = sum(not config_problem(c, rules) for c in configs)
    if valid > rules.max_configs:
        raise ValueError(f"the search space has {valid} valid configurations; at most {rules.max_configs} "
                         "(the autotuning rules' max_configs)")
    rows = []
    for config in configs:
        why = config_problem(config, rules)
        if why:
            rows.append({"config": config, "status": Status.REFUSED, "message": why})
            continue
        result = grade_kernel(assignment, rules.kernel, source, budget_s=budget_s, **tune_launch(config))
        timing = result.details.get("timing") or {}
        rows.append({"config": config, "status": result.status,
                     "message": "" if result.ok else result.failure_line(),
                     "ratio": timing.get("ratio"),
                     "gflops": timing["kernel"]["throughput"] / 1e9 if timing else None})
        print(f"{config}: {result.status}" + (f", {rows[-1]['gflops']:.0f} GFLOP/s, "
                                              f"{rows[-1]['ratio']:.3f} of cuBLAS" if timing else ""))
    ok = [r for r in rows if r["status"] == Status.OK and r["ratio"]]
    if not ok:
        raise RuntimeError("no configuration of the space was correct")
    return max(ok, key=lambda r: r["ratio"])["config"], rows
