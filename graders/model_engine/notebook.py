"""A model track's nbgrader source notebook (KernelBench's form), built from its spec, ``problem.py`` and reference
solutions; a track's ``notebook.py`` brings its introduction and its problems' titles.

Cells: the introduction, the set-up cell (`SETUP`: the imports a ``ModelNew`` cell may use, and the engine's calls),
then per problem in spec order: a markdown statement (the reference ``Model``, the sizes graded, the tolerance, the
points), the solution cell (grade_id ``<id>``: `solution_source` of the reference solution), a read-only
``<id>_check`` cell (`graders.model_engine.grade.check`) and the graded ``<id>_score`` cell (public: `assert_runs`;
hidden: `score_model`). Each problem's cell defines its own ``ModelNew``; the grader takes the one defined above each
test cell (`graders.submission`). The notebook's language is `graders.notebook.MODEL_LANGUAGE`, whose stub is a
comment and ``...``.
"""
from __future__ import annotations

import ast

import nbformat

from graders import notebook as nb
from graders import tracks
from graders.model_engine.grade import CHECK_TRIALS
from graders.model_engine.source import MAX_SOURCE_CHARS
from graders.model_engine.spec import ModelProblem, ModelSpec, load_model_spec
from graders.targets_gpu import targets_note

SETUP = """import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

from graders.model_engine.grade import assert_runs, check, score_model"""


def statement(number: int, title: str, spec: ModelSpec, problem: ModelProblem, origin: str) -> str:
    """A problem's markdown: ``title``, ``origin`` (where the reference comes from), the reference module as the
    track's ``problem.py`` holds it, the sizes, the tolerance and the points."""
    sizes = ", ".join(f"`{name}` = {value:,}" for name, value in problem.sizes.items())
    small = ", ".join(f"`{name}` = {value:,}" for name, value in problem.cpu_sizes.items())
    provisional = targets_note(spec.targets, spec.measured_in)
    model = tracks.get(spec.name).problem_module().SOURCES[problem.id].strip("\n")
    return "\n".join([
        f"## {number}. {title}", "",
        f"{origin}:", "", "```python", model, "```", "",
        f"* **Graded at:** {sizes} (the module's globals are set to these before `get_inputs()` runs); the check "
        f"cell's sizes: {small}.",
        f"* **Tolerance:** `atol` = {problem.atol:g}, `rtol` = {problem.rtol:g}.",
        f"* **Points:** {spec.points_correct:g} for a correct `ModelNew`, up to {spec.points_perf:g} more by its "
        f"speed-up over `torch.compile(Model)`: none below {problem.floor:g}x, all at {problem.target:g}x"
        f"{provisional}.",
    ])


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def solution_source(reference: str) -> str:
    """A reference solution as its problem's cell: its leading ``#`` lines dropped; the imports kept; everything
    else at the top level (the kernels) between nbgrader's solution markers; ``class ModelNew``'s methods kept
    with their bodies between markers (``__init__``'s ``super().__init__()`` kept)."""
    lines = reference.rstrip("\n").split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    while lines and not lines[0].strip():
        lines.pop(0)
    tree = ast.parse("\n".join(lines))
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    after_imports = imports[-1].end_lineno
    out = lines[:after_imports] + ["", "", "### BEGIN SOLUTION", *_trimmed(lines[after_imports:model.lineno - 1]),
                                   "### END SOLUTION", "", ""]
    out += lines[model.lineno - 1:model.body[0].lineno - 1]
    for method in model.body:
        start = method.body[0].lineno - 1
        kept = method.body[1:] if method.name == "__init__" and "super().__init__()" in ast.unparse(method.body[0]) \
            else method.body
        out += lines[method.lineno - 1:start]
        if kept is not method.body:
            out.append(lines[start])
        body = lines[kept[0].lineno - 1:method.end_lineno] if kept else []
        out += ["        ### BEGIN SOLUTION", *body, "        ### END SOLUTION", ""]
    return "\n".join(out).rstrip("\n")


def problem_cells(spec: ModelSpec, problem: ModelProblem) -> list[nbformat.NotebookNode]:
    """A problem's solution, check and graded cells."""
    args = f"{spec.name!r}, {problem.id!r}, ModelNew"
    source = solution_source(problem.reference.read_text())
    if len(source) > MAX_SOURCE_CHARS:
        raise ValueError(f"{problem.reference}: its cell is over the {MAX_SOURCE_CHARS} characters a ModelNew's "
                         "cell may hold")
    return [nb.solution(source, problem.id),
            nb.check_cell(f"check({args})", f"{problem.id}_check", problem.id),
            nb.graded_test(f"assert_runs({args})", f"score_model({args})", f"{problem.id}_score",
                           spec.max_points, "correctness and speed-up, on the GPU worker")]


def build(track: str, intro: str, titles: dict[str, str], origin) -> nbformat.NotebookNode:
    """The notebook of model track ``track``: ``intro`` formatted with the spec's numbers (``count``, ``trials``,
    ``runs``, ``correct``, ``perf``, ``check_trials``), then each problem's statement (``titles[id]``; ``origin``:
    the `ModelProblem` -> the line that introduces its reference) and cells."""
    spec = load_model_spec(track)
    cells = [nb.markdown(intro.format(count=len(spec.problems), trials=spec.trials, runs=spec.timed_runs,
                                      correct=spec.points_correct, perf=spec.points_perf, check_trials=CHECK_TRIALS)),
             nb.locked(SETUP, "setup")]
    for number, problem in enumerate(spec.problems.values(), start=1):
        cells.append(nb.markdown(statement(number, titles[problem.id], spec, problem, origin(problem))))
        cells += problem_cells(spec, problem)
    return nb.notebook(cells, language=nb.MODEL_LANGUAGE)
