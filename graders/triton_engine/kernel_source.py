"""A ``@triton.jit`` kernel read from the text of the cell that defines it: parsed, never run.

The source sent to the grading child is the cell itself with every line blanked except those of its top-level
``@triton.jit`` functions (the kernel and the helpers it calls), so that a line number in an error is the cell's
own. The child runs it with only ``triton`` and ``tl`` (``triton.language``) defined: imports, constants and
host code of the cell are not sent. The same reading serves the trusted grader (the submitted file's solution
cell, `graders.submission`) and the student's notebook (the cell IPython keeps for the kernel's function,
`kernel_from_function`).
"""
from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass

NAMES = {"triton": "import triton", "tl": "import triton.language as tl"}   # all a kernel's source may use


class TritonSourceError(ValueError):
    """A kernel cannot be read from its cell; the message says why."""


@dataclass(frozen=True)
class TritonKernel:
    """A Triton kernel as read from its cell: the source the child runs, and the kernel's function name."""

    source: str
    name: str

    @property
    def is_stub(self) -> bool:
        """Whether the kernel's body is still the release's stub (``raise NotImplementedError()``)."""
        node = next(n for n in ast.parse(self.source).body if isinstance(n, ast.FunctionDef) and n.name == self.name)
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
                and "NotImplementedError" in ast.unparse(body[0].exc))


def is_triton_jit(node: ast.stmt) -> bool:
    """A top-level function decorated with exactly ``@triton.jit``."""
    return (isinstance(node, ast.FunctionDef) and len(node.decorator_list) == 1
            and ast.unparse(node.decorator_list[0]) == "triton.jit")


def triton_kernel_in_cell(cell: str, name: str) -> TritonKernel | None:
    """The kernel ``name`` of ``cell``'s source, or None when ``name`` is not a ``@triton.jit`` function there.
    `TritonSourceError` when the cell does not parse."""
    try:
        tree = ast.parse(cell)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise TritonSourceError(f"the cell that defines {name} does not parse: {exc}") from None
    jitted = [n for n in tree.body if is_triton_jit(n)]
    if not any(n.name == name for n in jitted):
        return None
    lines = cell.split("\n")
    kept = [""] * len(lines)
    for node in jitted:
        first = node.decorator_list[0].lineno - 1
        kept[first:node.end_lineno] = lines[first:node.end_lineno]
    return TritonKernel("\n".join(kept).rstrip() + "\n", name)


def kernel_from_cell(cell: str, name: str) -> TritonKernel:
    """The kernel ``name`` of ``cell``; `TritonSourceError` when it is not a ``@triton.jit`` function there."""
    found = triton_kernel_in_cell(cell, name)
    if found is None:
        raise TritonSourceError(f"{name} is not a function decorated with @triton.jit in its cell")
    return found


def kernel_from_function(kernel) -> TritonKernel:
    """The kernel a notebook's ``@triton.jit`` object was defined by, read from the text of its cell (IPython
    keeps each cell's text where Python's ``linecache`` finds it) or file."""
    if isinstance(kernel, TritonKernel):
        return kernel
    fn = getattr(kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TritonSourceError(f"expected a kernel decorated with @triton.jit, got {type(kernel).__name__}")
    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        raise TritonSourceError(f"cannot read the cell that defines {fn.__name__}")
    return kernel_from_cell(text, fn.__name__)
