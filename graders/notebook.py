"""The one notebook builder: cells with nbgrader's metadata, for the tracks' ``notebook.py`` files.

A track's ``notebook.py`` defines ``build() -> NotebookNode`` from its spec and solutions with these
helpers; ``workshop build`` writes the result to ``assignments/<name>/<name>.ipynb``. nbgrader reads the
metadata back with `nbgrader.utils` (``is_grade``, ``is_solution``, ``is_locked``).
"""
from __future__ import annotations

import re

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from graders.hidden_tests import STUB_MARK

SCHEMA_VERSION = 3   # nbgrader's cell metadata schema
# nbgrader picks a release's solution stub by the notebook's kernelspec "language" (``ClearSolutions.code_stub``
# in nbgrader_config.py): the CUDA tracks' notebooks, whose solution regions are all CUDA C++ kernel bodies
# inside Python strings, are marked with this language so that their stub is a C++ comment that compiles.
# The kernel is Python 3 all the same (jupyter and nbgrader start kernels by the kernelspec's name).
CUDA_LANGUAGE = "cuda-c++"
CUDA_STUB = f"{STUB_MARK}: write this kernel's body (the step above says what it computes)"
# A notebook whose solution cells each begin with a value the student edits, which the release keeps (a sabotaged
# kernel's source, an answer's ``None``): the solution region after it, the reference's value, becomes this comment.
EDIT_LANGUAGE = "cuda-c++-edit"
EDIT_STUB = "# YOUR EDIT: fix the kernel, or replace None with your answer, above"
# A model track's notebook (KernelBench's form: a ``ModelNew`` class and the Triton kernels it launches in one cell),
# whose solution regions are a module's top level and method bodies: ``...`` is a statement at either.
MODEL_LANGUAGE = "python-model"
MODEL_STUB = "# YOUR CODE HERE\n..."
# How a CUDA track's check cells work (`graders.cuda_engine.grade.check`): one bullet of each track's introduction.
CUDA_CHECK_CELL = """\
* Run the **check** cell under each kernel: it compiles your code (no GPU needed) and reports registers,
  shared memory and spills. Without a GPU it then runs your kernel on this machine's CPU (the **CPU preview**;
  it needs g++) at a few small shapes on public inputs, a block's threads one at a time between barriers, in two
  orders, and says ✓ (right at those shapes), ✗ (wrong values, an access out of bounds, or a race such as a
  missing `__syncthreads()`, with the shape, the block and the thread) or ? (what it cannot run, such as inline
  PTX it does not know). A ✗ also fails `nbgrader validate`. The preview is not the grade: correctness at every
  shape, speed and real races are judged on the GPU worker."""


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
              points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = float(points)
    return {"nbgrader": meta}


def markdown(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(text)


def solution(source: str, grade_id: str) -> nbformat.NotebookNode:
    """A cell the student edits: nbgrader replaces what is between its solution markers with a stub."""
    return new_code_cell(source, metadata=_nbgrader(grade_id, solution=True))


def locked(source: str, grade_id: str) -> nbformat.NotebookNode:
    """A read-only cell the student runs (set-up, self-checks)."""
    return new_code_cell(source, metadata=_nbgrader(grade_id, locked=True))


def check_cell(call: str, grade_id: str, label: str) -> nbformat.NotebookNode:
    """A read-only check cell: ``call``. Where a name the call uses is not defined yet (its cell, or the setup cell,
    has not run), the cell prints one line saying which cell to run first, beginning as the check's own lines do
    (✗ and ``label``: the puzzle's title, the kernel's id), instead of raising a ``NameError``."""
    source = (f"try:\n    {call}\nexcept NameError as missing:   # a cell above has not run yet\n"
              f'    print(f"✗ {label}: {{missing.name}} is not defined: run the cell that defines {{missing.name}} '
              'first")')
    return locked(source, grade_id)


GRADED_LINE = re.compile(r"# Graded \([^)]*\): (.*?)\.?")   # a graded cell's first line (`graded_test`)


def graded_what(source: str) -> str:
    """What a graded cell grades, read back from its first line (`graded_test`): "correct on fresh inputs and more
    sizes"; "" for a cell without that line."""
    found = GRADED_LINE.fullmatch(source.split("\n", 1)[0])
    return found[1] if found else ""


def graded_test(public: str, call: str, grade_id: str, points: float, what: str) -> nbformat.NotebookNode:
    """A graded cell: the ``public`` test, which the student sees and which raises when it fails (so
    ``nbgrader validate`` fails), then one call to a registered hidden test (`graders.hidden_tests`) between
    nbgrader's hidden-test markers. Only the hidden call is graded: the trusted grader makes it and replaces
    the cell's output."""
    plural = "" if points == 1 else "s"
    source = (f"# Graded ({points:g} point{plural}): {what}.\n{public}\n### BEGIN HIDDEN TESTS\n{call}\n"
              "### END HIDDEN TESTS")
    return new_code_cell(source, metadata=_nbgrader(grade_id, grade=True, locked=True, points=points))


def cuda_kernel_cells(assignment: str, kernel, *, extra: str = "", launch: str = "",
                      score_call: str | None = None) -> list[nbformat.NotebookNode]:
    """One CUDA kernel's cells after its statement: the solution cell (``<id>_src``, its reference as
    `cuda_solution_source`, then the ``extra`` lines), the read-only ``<id>_check`` cell (`check_cell`: compiles,
    no GPU needed; `graders.cuda_engine.grade.check`) and the graded ``<id>_score`` cell (public: it compiles;
    hidden: correctness and speed).

    ``kernel`` is the spec's `graders.cuda_engine.spec.KernelSpec`; ``launch`` is appended to the arguments of
    every call (``", block=best_block"``); ``score_call`` replaces the hidden test's ``score(...)`` call.
    """
    kid = kernel.id
    source = cuda_solution_source(f"{kid}_src", kernel.reference.read_text()) + (f"\n{extra}" if extra else "")
    call = score_call or f"score({assignment!r}, {kid!r}, {kid}_src{launch})"
    return [solution(source, kid),
            check_cell(f"check({assignment!r}, {kid!r}, {kid}_src{launch})", f"{kid}_check", kid),
            graded_test(assert_compiles(assignment, kid, launch), call, f"{kid}_score", kernel.points,
                        "correctness and speed, on the GPU worker")]


def assert_compiles(assignment: str, kernel_id: str, launch: str = "") -> str:
    """The public test of a CUDA kernel's graded cells: it compiles (all a machine without a GPU can check)."""
    return f"assert_compiles({assignment!r}, {kernel_id!r}, {kernel_id}_src{launch})"


NUMBA_TARGET = """import os

from graders.gpu import detect_gpu

# Before numba.cuda is imported: without a GPU, kernels (also those you launch by hand) run in numba-cuda's
# simulator on the CPU.
GPU = None if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else detect_gpu()
if GPU is None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
"""
NUMBA_TARGET_SAID = """where = f"on the GPU ({GPU.name})" if GPU else "in numba-cuda's simulator on the CPU (NUMBA_ENABLE_CUDASIM=1)"
print(f"numba.cuda kernels run {where}.")"""


def numba_setup(imports: str) -> str:
    """A numba track's setup cell: pick the target before ``imports`` (which import numba.cuda), then say which."""
    return f"{NUMBA_TARGET}\n{imports.strip()}\n\n{NUMBA_TARGET_SAID}"


def notebook(cells: list[nbformat.NotebookNode], language: str = "python") -> nbformat.NotebookNode:
    """A notebook of ``cells`` for the Python 3 kernel; ``language`` picks nbgrader's solution stub."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": language},
                                "language_info": {"name": "python"}})
    nb.cells = cells
    return nb


def cuda_solution_source(variable: str, reference: str) -> str:
    """``<variable> = r\"\"\"...\"\"\"``: a CUDA reference file as a solution cell, the body of its ``extern "C"``
    kernel between nbgrader's solution markers, indented like the body (leading ``//`` comment lines dropped)."""
    lines = reference.rstrip("\n").split("\n")
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    start = next(i for i, line in enumerate(lines) if line.startswith('extern "C"'))
    open_at = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("{"))
    close_at = max(i for i, line in enumerate(lines) if line.rstrip() == "}")
    body = [*lines[:open_at + 1], "    ### BEGIN SOLUTION", *lines[open_at + 1:close_at], "    ### END SOLUTION",
            *lines[close_at:]]
    return f'{variable} = r"""\n' + "\n".join(body) + '\n"""'


def leading_comment(reference: str) -> str:
    """The ``//`` comment lines a CUDA reference starts with, as markdown: one paragraph, each ``- `` bullet
    on a line of its own."""
    parts = [[]]
    for line in reference.split("\n"):
        if not line.startswith("//"):
            break
        text = line[2:].strip()
        if text.startswith("- "):
            parts.append([])
        parts[-1].append(text)
    return "\n".join(re.sub(r"\s+", " ", " ".join(part)).strip() for part in parts)
