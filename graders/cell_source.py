"""Read a kernel's self-contained source out of a submitted cell's text, without running the cell.

Used by the out-of-band audit: the student's cell is parsed, never executed, so nothing it does (patching
the grader, printing, hanging at top level) can influence what is graded. What is kept: imports of
``numba``, ``math`` and ``numpy``; top-level assignments of plain numbers (``TPB = 8``); and every
``@cuda.jit`` function, so device functions come along with the kernel.
"""
from __future__ import annotations

import ast

from graders.kernel_source import PRELUDE, KernelSourceError

_ALLOWED_MODULES = ("numba", "math", "numpy")


def kernel_source_from_cell(cell: str, kernel_name: str) -> str:
    try:
        tree = ast.parse(cell)
    except SyntaxError as exc:
        raise KernelSourceError(f"the cell does not parse: line {exc.lineno}: {exc.msg}") from None
    kept: list[str] = list(PRELUDE.values())
    names: set[str] = set()
    constants: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and _allowed(node):
            kept.append(ast.get_source_segment(cell, node))
        elif isinstance(node, ast.Assign) and _is_number(node.value, constants):
            kept.append(ast.get_source_segment(cell, node))
            constants |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.FunctionDef) and any(_is_cuda_jit(d) for d in node.decorator_list):
            kept.append(_with_decorators(cell, node))
            names.add(node.name)
    if kernel_name not in names:
        raise KernelSourceError(f"the cell defines no @cuda.jit function named {kernel_name}")
    return "\n\n".join(kept) + "\n"


def _allowed(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    return all(m.split(".")[0] in _ALLOWED_MODULES for m in modules)


def _is_number(node: ast.expr, constants: set[str]) -> bool:
    """A number, a constant kept before, or arithmetic on those (``TPB + MAX_CONV``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _is_number(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left, constants) and _is_number(node.right, constants)
    if isinstance(node, ast.Name):
        return node.id in constants
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _is_cuda_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("cuda.jit", "numba.cuda.jit")


def _with_decorators(cell: str, node: ast.FunctionDef) -> str:
    lines = cell.splitlines()
    start = min(d.lineno for d in node.decorator_list) - 1
    return "\n".join(lines[start:node.end_lineno])
