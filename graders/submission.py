"""What a student handed in, read from the submitted notebook's text: parsed, never run.

The trusted grader takes each hidden test cell's call (``score('gemm', 'naive', naive_src)``) and resolves
its arguments here: literals stay literals, and each name is looked up among the top-level definitions of
the notebook's *solution* cells (the cells nbgrader marks as the student's answers), in notebook order, the
last definition winning as it would when the notebook runs:

- ``name = <literal>`` (a CUDA C++ source string, a search space dict, a launch choice): its value;
- ``@cuda.jit def name(...)``: a `SubmittedKernel`, the kernel's self-contained source taken from its cell
  by `graders.numba_engine.cell_source.kernel_source_from_cell`;
- ``@triton.jit def name(...)``: a `graders.triton_engine.kernel_source.TritonKernel`, its cell's ``@triton.jit``
  functions;
- ``@tilelang.jit def name(...)``: a `graders.tilelang_engine.kernel_source.TileLangKernel`, that builder;
- ``class Name``: a `graders.model_engine.source.ModelSource`, the text of the cell that defines it. A class is
  looked up relative to the test cell: the definition last *above* it, as when the notebook runs top to bottom
  (each problem of a KernelBench-style track defines its own ``ModelNew``, and its test cell grades that one).

Anything else (a value computed by code, a name defined only in a cell the student added) is not read: the
test fails and says so. Nothing the notebook's kernel did while it ran can change what is found here.

What is read is capped, and each cap says in the feedback which it is and its size: the notebook file itself,
before anything parses it (`file_problem`: its bytes, and the objects, arrays and values of its JSON, which is
what parsing costs in memory), its cells (`notebook_problem`: how many, and each one's length), each literal a
hidden test reads (`MAX_LITERAL_NODES`) and each numba kernel's source (`MAX_KERNEL_CHARS`). Cells are parsed
one at a time and each name is resolved once.
"""
from __future__ import annotations

import ast
import copy
import re
import threading
from dataclasses import dataclass

from nbformat import NotebookNode
from nbgrader import utils

from graders.model_engine.source import ModelSource
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.kernel_source import KernelSourceError, SubmittedKernel
from graders.tilelang_engine.kernel_source import TileLangKernel, TileLangSourceError, tilelang_kernel_in_cell
from graders.triton_engine.kernel_source import TritonSourceError, triton_kernel_in_cell

MAX_NOTEBOOK_BYTES = 8 << 20   # the submitted notebook file
MAX_JSON_CONTAINERS = 20_000   # objects and arrays in its JSON
MAX_JSON_VALUES = 200_000      # values in its JSON (strings, numbers, objects, arrays ...)
MAX_CELLS = 1_000
MAX_SOURCE_CHARS = 50_000      # characters of any one cell
MAX_LITERAL_NODES = 10_000     # values, keys and containers of one literal a hidden test reads
MAX_KERNEL_CHARS = 20_000      # a kernel's source as its grading child gets it (numba or Triton)
CLEAR_OUTPUTS = "clear the notebook's outputs (Kernel > Restart Kernel and Clear Outputs) and hand it in again"
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.S)   # a string, or an unterminated one to the end


def file_problem(data: bytes) -> str:
    """'' or why a submitted notebook's file is not parsed: over a cap on its size or on what its JSON would
    become in memory (objects, arrays, values; counted outside strings, without parsing it)."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        return (f"the notebook file is larger than {MAX_NOTEBOOK_BYTES} bytes (the cap on a submitted notebook's "
                f"size): {CLEAR_OUTPUTS}")
    bare = _JSON_STRING.sub(b'""', data)
    containers = bare.count(b"{") + bare.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        return (f"the notebook file holds {containers} JSON objects and arrays; a submitted notebook may hold at "
                f"most {MAX_JSON_CONTAINERS}: {CLEAR_OUTPUTS}")
    values = containers + bare.count(b",") + 1
    if values > MAX_JSON_VALUES:
        return (f"the notebook file holds about {values} JSON values; a submitted notebook may hold at most "
                f"{MAX_JSON_VALUES}: {CLEAR_OUTPUTS}")
    return ""


def notebook_problem(nb: NotebookNode) -> str:
    """'' or why a parsed notebook is not graded: more cells than `MAX_CELLS`, or a cell longer than
    `MAX_SOURCE_CHARS`."""
    cells = nb.get("cells", [])
    if len(cells) > MAX_CELLS:
        return f"the notebook has {len(cells)} cells; a submitted notebook may have at most {MAX_CELLS}"
    for number, cell in enumerate(cells, 1):
        if len(cell.get("source", "")) > MAX_SOURCE_CHARS:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            return (f"cell {number}{f' ({grade_id})' if grade_id else ''} of the notebook holds {len(cell.source)} "
                    f"characters; a cell may hold at most {MAX_SOURCE_CHARS}")
    return ""


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
        self._definitions: dict[str, tuple[str, str]] = {}   # name -> (kind, cell source, or why it is not read)
        self._classes: dict[str, list[tuple[int, str]]] = {}  # class name -> (cell position, cell source), in order
        self._positions: dict[str, int] = {}                   # grade_id -> the cell's position in the notebook
        self.unparsed: list[str] = []                          # grade_ids of solution cells that do not parse
        self._resolved: dict[str, tuple[object, str]] = {}     # name -> (value, or '' and why it is not one)
        self._lock = threading.Lock()                          # hidden tests resolve names from several threads
        for position, cell in enumerate(nb.cells):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id is not None:
                self._positions.setdefault(grade_id, position)
            if cell.cell_type == "code" and utils.is_solution(cell):
                self._read_cell(cell, position)

    def _read_cell(self, cell: NotebookNode, position: int) -> None:
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
            if isinstance(node, ast.ClassDef):
                self._classes.setdefault(node.name, []).append((position, cell.source))
            elif isinstance(node, ast.FunctionDef):
                self._definitions[node.name] = ("kernel", cell.source)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name, parts = node.targets[0].id, sum(1 for _ in ast.walk(node.value))
                self._definitions[name] = ("literal", ast.get_source_segment(cell.source, node.value)) \
                    if parts <= MAX_LITERAL_NODES else \
                    ("refused", f"{name} is a literal of {parts} parts (values, keys and containers); the grader "
                                f"reads at most {MAX_LITERAL_NODES}")

    def value(self, name: str):
        """What ``name`` is bound to by the solution cells, or `SubmissionError`. Resolved once (one name at a
        time); each call gets its own copy."""
        with self._lock:
            if name not in self._resolved:
                try:
                    self._resolved[name] = (self._resolve(name), "")
                except SubmissionError as exc:
                    self._resolved[name] = (None, str(exc))
            value, why = self._resolved[name]
        if why:
            raise SubmissionError(why)
        return copy.deepcopy(value)

    def _resolve(self, name: str):
        if name not in self._definitions:
            hint = f" (solution cells that do not parse: {', '.join(self.unparsed)})" if self.unparsed else ""
            raise SubmissionError(f"the notebook's solution cells do not define {name}{hint}")
        kind, text = self._definitions[name]
        if kind == "refused":
            raise SubmissionError(text)
        if kind == "kernel":
            try:
                read_kernel = triton_kernel_in_cell(text, name) or tilelang_kernel_in_cell(text, name)
                source = read_kernel.source if read_kernel else kernel_source_from_cell(text, name)
            except (KernelSourceError, TritonSourceError, TileLangSourceError) as exc:
                raise SubmissionError(str(exc)) from None
            if len(source) > MAX_KERNEL_CHARS:
                read = ("@cuda.jit functions, imports and constants" if read_kernel is None else
                        "@tilelang.jit builder" if isinstance(read_kernel, TileLangKernel) else "@triton.jit functions")
                raise SubmissionError(f"the source of {name} (its cell's {read}) holds {len(source)} characters; the "
                                      f"grader reads at most {MAX_KERNEL_CHARS}")
            return read_kernel or SubmittedKernel(source, name)
        try:
            return ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise SubmissionError(f"{name} must be a literal (a string, number, list or dict) in its solution "
                                  "cell: the grader reads it from the file and does not run code") from None

    def defined_class(self, name: str, at: str) -> ModelSource:
        """The class ``name`` as defined last above the cell ``at`` (a grade_id), or `SubmissionError`."""
        above = self._positions.get(at, -1)
        found = [text for position, text in self._classes.get(name, []) if position < above]
        if not found:
            raise SubmissionError(f"no solution cell above {at} defines the class {name}")
        return ModelSource(found[-1])

    def resolve(self, node: ast.expr, at: str = ""):
        """A call argument's value: a literal, or a name defined in the solution cells (a class: the one defined
        above the test cell ``at``)."""
        if isinstance(node, ast.Name) and node.id in self._classes:
            return self.defined_class(node.id, at)
        if isinstance(node, ast.Name):
            return self.value(node.id)
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise SubmissionError(f"the test cell's argument {ast.unparse(node)} is neither a literal nor a "
                                  "name") from None
