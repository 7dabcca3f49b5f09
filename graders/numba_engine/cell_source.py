"""Read a kernel's self-contained source out of a submitted cell's text, without running the cell.

Used by the trusted grader and the out-of-band audit: the student's cell is parsed, never executed, so
nothing it does (patching the grader, printing, hanging at top level) can influence what is graded. What
is kept: imports of ``numba``, ``math`` and ``numpy``; top-level assignments of plain numbers (``TPB = 8``,
``TPB_MAX_CONV = TPB + MAX_CONV``); and every ``@cuda.jit`` function, so device functions come along with
the kernel. Everything else is left out, never run. What is kept must lie within the numba-CUDA kernel
subset (`graders.numba_engine.numba_subset`); otherwise `KernelSourceError` names the line of the cell.
"""
from __future__ import annotations

import ast

from graders.numba_engine.kernel_source import PRELUDE, KernelSourceError
from graders.numba_engine.numba_subset import CONSTANT_PATHS, parse, validate_kernel_source, validate_module

_ALLOWED_MODULES = ("numba", "math", "numpy")


def kernel_source_from_cell(cell: str, kernel_name: str) -> str:
    tree = parse(cell, "the cell")
    kept: list[str] = list(PRELUDE.values())
    kept_nodes: list[ast.stmt] = []
    dropped: set[str] = set()
    names: set[str] = set()
    constants: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and _allowed(node):
            kept.append(ast.get_source_segment(cell, node))
        elif _is_constant(node, constants):
            kept.append(ast.get_source_segment(cell, node))
            constants |= set(_targets(node))
        elif isinstance(node, ast.FunctionDef) and any(_is_cuda_jit(d) for d in node.decorator_list):
            kept.append(_with_decorators(cell, node))
            names.add(node.name)
        else:
            dropped |= _bound_names(node)
            continue
        kept_nodes.append(node)
    if kernel_name not in names:
        raise KernelSourceError(f"the cell defines no @cuda.jit function named {kernel_name}")
    # Checked as the cell's own statements, so that errors name the line of the cell ...
    prelude = ast.parse("\n".join(PRELUDE.values())).body
    validate_module([*prelude, *kept_nodes], frozenset(dropped - names - constants))
    source = "\n\n".join(kept) + "\n"
    validate_kernel_source(source)      # ... and once more as the text the grader will run.
    return source


def _allowed(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    return all(m.split(".")[0] in _ALLOWED_MODULES for m in modules)


def _targets(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _is_constant(node: ast.stmt, constants: set[str]) -> bool:
    """``NAME = <number>`` (``NAME: int = <number>``), the only assignments kept."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign) and node.value is not None and node.simple:
        targets = [node.target]
    else:
        return False
    return all(isinstance(t, ast.Name) for t in targets) and _is_number(node.value, constants)


def _is_number(node: ast.expr, constants: set[str]) -> bool:
    """A number, a constant kept before, ``math.pi`` and the like, or arithmetic on those."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _is_number(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left, constants) and _is_number(node.right, constants)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):
        return ast.unparse(node) in CONSTANT_PATHS
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool)


def _bound_names(node: ast.stmt) -> set[str]:
    """Top-level names a statement that is left out would have bound (for a clearer error message)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _is_cuda_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("cuda.jit", "numba.cuda.jit")


def _with_decorators(cell: str, node: ast.FunctionDef) -> str:
    # Lines as Python counts them (str.splitlines would also split at form feeds and U+2028).
    lines = cell.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = min(d.lineno for d in node.decorator_list) - 1
    return "\n".join(lines[start:node.end_lineno])
