"""What a student handed in, read from the submitted notebook's text: parsed, never run.

The trusted grader takes each hidden test cell's call (``score('gemm', 'naive', naive_src)``) and resolves
its arguments here: literals stay literals, and each name is looked up among the top-level definitions of
the notebook's *solution* cells (the cells nbgrader marks as the student's answers), in notebook order, the
last definition winning as it would when the notebook runs:

- ``name = <literal>`` (a CUDA C++ source string, a search space dict, a launch choice): its value;
- ``@cuda.jit def name(...)``: a `SubmittedKernel`, the kernel's self-contained source taken from its cell
  by `graders.numba_engine.cell_source.kernel_source_from_cell`.

Anything else (a value computed by code, a name defined only in a cell the student added) is not read: the
test fails and says so. Nothing the notebook's kernel did while it ran can change what is found here.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from nbformat import NotebookNode
from nbgrader import utils

from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.kernel_source import KernelSourceError, SubmittedKernel

MAX_SOURCE_CHARS = 200_000    # a solution cell longer than this is not parsed


class SubmissionError(Exception):
    """The submitted file does not define what a hidden test needs; the message says what is missing."""


@dataclass(frozen=True)
class HiddenCall:
    """The one grading call of a hidden test cell."""

    function: str
    args: tuple[ast.expr, ...]
    keywords: tuple[tuple[str, ast.expr], ...]


def hidden_call(test_cell_source: str, known: set[str]) -> HiddenCall:
    """The call in a test cell to one of the ``known`` functions (imports in the cell are ignored)."""
    calls = []
    for node in ast.parse(test_cell_source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id in known:
            call = node.value
            if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
                raise SubmissionError(f"{call.func.id}: the test cell's call uses * or ** arguments")
            calls.append(HiddenCall(call.func.id, tuple(call.args), tuple((k.arg, k.value) for k in call.keywords)))
    if len(calls) != 1:
        raise SubmissionError(f"the test cell holds {len(calls)} grading calls; exactly one is expected")
    return calls[0]


class Submission:
    """The solution cells of one submitted notebook, and the values its names resolve to."""

    def __init__(self, nb: NotebookNode):
        self._definitions: dict[str, tuple[str, str]] = {}   # name -> (kind, cell source)
        self.unparsed: list[str] = []                          # grade_ids of solution cells that do not parse
        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_solution(cell):
                self._read_cell(cell)

    def _read_cell(self, cell: NotebookNode) -> None:
        grade_id = cell.metadata["nbgrader"].get("grade_id", "?")
        if len(cell.source) > MAX_SOURCE_CHARS:
            self.unparsed.append(grade_id)
            return
        try:
            tree = ast.parse(cell.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.unparsed.append(grade_id)
            return
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self._definitions[node.name] = ("kernel", cell.source)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self._definitions[node.targets[0].id] = ("literal", ast.get_source_segment(cell.source, node.value))

    def value(self, name: str):
        """What ``name`` is bound to by the solution cells, or `SubmissionError`."""
        if name not in self._definitions:
            hint = f" (solution cells that do not parse: {', '.join(self.unparsed)})" if self.unparsed else ""
            raise SubmissionError(f"the notebook's solution cells do not define {name}{hint}")
        kind, text = self._definitions[name]
        if kind == "kernel":
            try:
                return SubmittedKernel(kernel_source_from_cell(text, name), name)
            except KernelSourceError as exc:
                raise SubmissionError(str(exc)) from None
        try:
            return ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise SubmissionError(f"{name} must be a literal (a string, number, list or dict) in its solution "
                                  "cell: the grader reads it from the file and does not run code") from None

    def resolve(self, node: ast.expr):
        """A call argument's value: a literal, or a name defined in the solution cells."""
        if isinstance(node, ast.Name):
            return self.value(node.id)
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise SubmissionError(f"the test cell's argument {ast.unparse(node)} is neither a literal nor a "
                                  "name") from None
