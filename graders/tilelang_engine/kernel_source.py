"""A TileLang kernel read from the text of the cell that defines it: parsed, never run.

The form is TileLang's own: a top-level builder decorated with exactly ``@tilelang.jit`` whose parameters are
the kernel's tuning knobs (tile sizes, ``num_stages``, ``threads``), each with a literal default; its body binds
the problem's sizes (``M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")``), defines one
``@T.prim_func`` and returns it::

    @tilelang.jit
    def matmul_fp16(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256):
        M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

        @T.prim_func
        def kernel(out: T.Tensor((M, N), "float16"), a: T.Tensor((M, K), "float16"), ...):
            ...

        return kernel

The grading child calls the builder with its defaults, so the knobs are the student's literals, and compiles the
``@T.prim_func`` once for every shape (`graders.tilelang_engine.child`).

TileLang runs Python as it builds the kernel (the builder's body, and the prim_func's body rewritten by its
parser), so what is read is held to the DSL (`kernel_problems`): the names a builder may use are its parameters,
its own variables, the prim_func's parameters and variables, ``T`` and a few builtins (`BUILTINS`); every
attribute is ``T.<name>`` with the name in `DSL`, or ``T.<enumeration>.<member>`` of `ENUMS` (e.g.
``T.GemmWarpPolicy.FullRow``); no other attribute, no name that begins with ``_``, no
``**`` in a call; statements are assignments, ``for``, ``with``, ``if``, expressions, ``pass`` and the builder's
one ``@T.prim_func`` and ``return``. The source sent to the child is the cell with every line blanked except
the builder's (so that a line number in an error is the cell's own); the child blanks the decorator too and runs
the rest with only ``T`` (``tilelang.language``) defined. The same reading serves the trusted grader (the
submitted file's solution cell, `graders.submission`) and the student's notebook (`kernel_from_function`).
"""
from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass

BUILTINS = frozenset({"range", "min", "max", "float", "int"})
# tilelang.language's names a kernel may use: kernel launch and sizes, memory, loops, tile operators, math, dtypes
DSL = frozenset({
    "Kernel", "Tensor", "Buffer", "dynamic", "symbolic",
    "alloc_shared", "alloc_fragment", "alloc_local", "alloc_var",
    "Pipelined", "Parallel", "serial", "unroll", "vectorized",
    "copy", "gemm", "clear", "fill", "reduce_max", "reduce_sum", "reduce_min", "reduce_absmax", "cumsum",
    "use_swizzle", "sync_threads", "atomic_add",
    "exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt", "abs", "max", "min", "tanh", "sigmoid", "erf", "floor",
    "ceil", "round", "clamp", "ceildiv", "if_then_else", "cast", "infinity", "max_value", "min_value",
    "float16", "float32", "float64", "bfloat16", "int8", "int32", "int64", "uint8", "bool",
})
# tilelang.language's enumerations a kernel may name a member of, as T.<enumeration>.<member>
ENUMS = {"GemmWarpPolicy": frozenset({"Square", "FullRow", "FullCol"})}
_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.If, ast.Expr, ast.Pass)
_NOT_DSL = (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp, ast.SetComp, ast.DictComp,
            ast.GeneratorExp, ast.JoinedStr, ast.NamedExpr, ast.Starred)   # expressions; statements: _STATEMENTS


class TileLangSourceError(ValueError):
    """A kernel cannot be read from its cell; the message says why."""


@dataclass(frozen=True)
class TileLangKernel:
    """A TileLang kernel as read from its cell: the source the child runs, and the builder's name."""

    source: str
    name: str

    def builder(self) -> ast.FunctionDef:
        return next(n for n in ast.parse(self.source).body if isinstance(n, ast.FunctionDef) and n.name == self.name)

    @property
    def is_stub(self) -> bool:
        """Whether the builder's body is still the release's stub (``raise NotImplementedError()``)."""
        body = [s for s in self.builder().body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
                and "NotImplementedError" in ast.unparse(body[0].exc))

    def knobs(self) -> dict:
        """The builder's parameters and their literal defaults: the tile sizes, stages and threads it is built
        with."""
        args = self.builder().args
        return {a.arg: ast.literal_eval(d) for a, d in zip(args.args[len(args.args) - len(args.defaults):],
                                                            args.defaults)}


def is_tilelang_jit(node: ast.stmt) -> bool:
    """A top-level function decorated with exactly ``@tilelang.jit``."""
    return (isinstance(node, ast.FunctionDef) and len(node.decorator_list) == 1
            and ast.unparse(node.decorator_list[0]) == "tilelang.jit")


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, str, bool)


def _is_prim_func(node: ast.stmt) -> bool:
    return (isinstance(node, ast.FunctionDef) and len(node.decorator_list) == 1
            and ast.unparse(node.decorator_list[0]) == "T.prim_func")


def _stored(nodes: list[ast.AST]) -> set[str]:
    return {n.id for part in nodes for n in ast.walk(part) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _annotations(fn: ast.FunctionDef) -> list[ast.expr]:
    """``fn``'s parameter and return annotations: Python evaluates them when ``fn`` is defined."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, *filter(None, [fn.args.vararg, fn.args.kwarg])]
    return [*filter(None, [a.annotation for a in args]), *filter(None, [fn.returns])]


def _form_problems(fn: ast.FunctionDef) -> list[str]:
    """What in the builder's shape is not the module docstring's form."""
    problems = []
    args = fn.args
    if args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or len(args.defaults) != len(args.args):
        problems.append(f"line {fn.lineno}: every parameter of {fn.name} is a plain one with a default value "
                        f"(block_M=128, ...)")
    for default in args.defaults:
        if not _literal(default):
            problems.append(f"line {default.lineno}: a default value of {fn.name} must be a literal number or "
                            f"string, not {ast.unparse(default)}")
    prim = [s for s in fn.body if _is_prim_func(s)]
    last = fn.body[-1]
    if len(prim) != 1:
        problems.append(f"line {fn.lineno}: {fn.name} defines exactly one @T.prim_func, not {len(prim)}")
    elif not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == prim[0].name):
        problems.append(f"line {last.lineno}: {fn.name} ends with return {prim[0].name}")
    for stmt in fn.body:
        if stmt is not last and not _is_prim_func(stmt) and not isinstance(stmt, (ast.Assign, ast.Expr)):
            problems.append(f"line {stmt.lineno}: {fn.name}'s body holds assignments, its @T.prim_func and its "
                            f"return, not {type(stmt).__name__}")
    return problems


def kernel_problems(fn: ast.FunctionDef) -> list[str]:
    """What in the ``@tilelang.jit`` builder ``fn`` is not TileLang kernel code (see the module's docstring), each
    as ``line N: why``; [] when nothing is."""
    problems = _form_problems(fn)
    prims = [s for s in fn.body if _is_prim_func(s)]
    own = {a.arg for a in fn.args.args} | _stored(fn.body) | {p.name for p in prims}
    for prim in prims:
        own |= {a.arg for a in [*prim.args.posonlyargs, *prim.args.args, *prim.args.kwonlyargs]}
        if prim.args.vararg or prim.args.kwarg or prim.args.defaults or prim.args.kw_defaults:
            problems.append(f"line {prim.lineno}: {prim.name}'s parameters are tensors without defaults")
        for stmt in prim.body:
            problems += [f"line {n.lineno}: {type(n).__name__} is not TileLang kernel code"
                         for n in ast.walk(stmt) if isinstance(n, ast.stmt) and not isinstance(n, _STATEMENTS)]
    parts = [*fn.args.defaults, *_annotations(fn), *(s for s in fn.body if not _is_prim_func(s))]
    for prim in prims:
        parts += [*_annotations(prim), *prim.body]
    nodes = [n for part in parts for n in ast.walk(part)]
    chained = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    members = [n for n in nodes if _is_enum_member(n)]
    allowed = {id(n) for n in members} | {id(n.value) for n in members}   # T.<enumeration>.<member>, T.<enumeration>
    for node in nodes:
        if id(node) in allowed:
            continue
        if isinstance(node, _NOT_DSL):
            problems.append(f"line {node.lineno}: {type(node).__name__} is not TileLang kernel code")
        elif isinstance(node, ast.Name) and node.id.startswith("_"):
            problems.append(f"line {node.lineno}: {fn.name} uses {node.id}; a kernel's names do not begin with _")
        elif isinstance(node, ast.Name) and node.id == "T" and id(node) not in chained:
            problems.append(f"line {node.lineno}: {fn.name} uses T itself; a kernel uses only what it holds "
                            f"(T.copy, T.gemm, ...)")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in own | BUILTINS | {"T"}:
            problems.append(f"line {node.lineno}: {fn.name} uses {node.id}; a kernel may use its parameters, its "
                            f"own variables, T and {', '.join(sorted(BUILTINS))}")
        elif isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id == "T"
                                                      and node.attr in DSL and isinstance(node.ctx, ast.Load)):
            problems.append(f"line {node.lineno}: {fn.name} uses {ast.unparse(node)}; the attributes a kernel uses "
                            f"are T.<name> of TileLang's DSL ({', '.join(sorted(DSL))})")
        elif isinstance(node, ast.Call) and any(k.arg is None for k in node.keywords):
            problems.append(f"line {node.lineno}: a call in {fn.name} passes **; keywords are written out")
    return problems


def _is_enum_member(node: ast.AST) -> bool:
    """Whether ``node`` reads ``T.<enumeration>.<member>`` of `ENUMS`."""
    return (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in ENUMS.get(
            getattr(node.value, "attr", None), ()) and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "T")


def tilelang_kernel_in_cell(cell: str, name: str) -> TileLangKernel | None:
    """The kernel ``name`` of ``cell``'s source, or None when ``name`` is not a ``@tilelang.jit`` function there.
    `TileLangSourceError` when the cell does not parse or the kernel is not TileLang kernel code."""
    try:
        tree = ast.parse(cell)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise TileLangSourceError(f"the cell that defines {name} does not parse: {exc}") from None
    node = next((n for n in tree.body if is_tilelang_jit(n) and n.name == name), None)
    if node is None:
        return None
    lines = cell.split("\n")
    kept = [""] * len(lines)
    first = node.decorator_list[0].lineno - 1
    kept[first:node.end_lineno] = lines[first:node.end_lineno]
    kernel = TileLangKernel("\n".join(kept).rstrip() + "\n", name)
    problems = [] if kernel.is_stub else kernel_problems(node)   # a stub is never run
    if problems:
        raise TileLangSourceError(f"{name}'s cell holds what is not TileLang kernel code: " + "; ".join(problems[:3]))
    return kernel


def kernel_from_cell(cell: str, name: str) -> TileLangKernel:
    """The kernel ``name`` of ``cell``; `TileLangSourceError` when it is not a ``@tilelang.jit`` function there."""
    found = tilelang_kernel_in_cell(cell, name)
    if found is None:
        raise TileLangSourceError(f"{name} is not a function decorated with @tilelang.jit in its cell")
    return found


def kernel_from_function(kernel) -> TileLangKernel:
    """The kernel a notebook's ``@tilelang.jit`` object was defined by, read from the text of its cell (IPython
    keeps each cell's text where Python's ``linecache`` finds it) or file."""
    if isinstance(kernel, TileLangKernel):
        return kernel
    fn = getattr(getattr(kernel, "func", None), "orig_func", None)   # tilelang.jit's JITImpl -> JITFunc -> function
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TileLangSourceError(f"expected a kernel decorated with @tilelang.jit, got {type(kernel).__name__}")
    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        raise TileLangSourceError(f"cannot read the cell that defines {fn.__name__}")
    return kernel_from_cell(text, fn.__name__)
