"""A ``@triton.jit`` kernel read from the text of the cell that defines it: parsed, never run.

The source sent to the grading child is the cell itself with every line blanked except those of its top-level
``@triton.jit`` functions (the kernel and the helpers it calls), so that a line number in an error is the cell's
own. The child runs it with only ``triton`` and ``tl`` (``triton.language``) defined: imports, constants and
host code of the cell are not sent.

Triton runs Python as it compiles (it calls what a kernel's names lead to), so a kernel is held to what kernel
code needs (`kernel_problems`): its names are its arguments, its own variables, ``tl``, the cell's other
``@triton.jit`` functions and the builtins Triton compiles (`BUILTINS`); no attribute begins with ``_``; default
values are literals; no imports, nested functions, classes or comprehensions. The grading child also resolves
each ``tl.`` chain before running anything (`graders.triton_engine.child`): it must stay inside
``triton.language`` and end at no module. Nothing of the cell runs as host Python, in the grader or the child.
The same reading serves the trusted grader (the submitted file's solution cell, `graders.submission`) and the
student's notebook (the cell IPython keeps for the kernel's function, `kernel_from_function`).

A ``@triton.jit`` function may also be decorated, above it, with ``@triton.autotune(configs=[...], key=[...])``
written as literals (`read_autotune`): each config ``triton.Config({"NAME": int, ...}, num_warps=int,
num_stages=int)``, its names the function's ``tl.constexpr`` parameters, at most `MAX_AUTOTUNE_CONFIGS`
of them; ``key`` a list of the function's parameter names. Nothing else is read as an autotune decorator; the
grading child applies the configs itself (`graders.triton_engine.child`).
"""
from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass

from graders.triton_engine.spec import MAX_BLOCK_SIZE, NUM_WARPS

BUILTINS = frozenset({"range", "min", "max", "float", "int", "len", "print", "isinstance"})   # Triton compiles these
MAX_AUTOTUNE_CONFIGS = 16   # each is compiled and benchmarked in the grading child, within its time limit
MAX_STAGES = 8
_NOT_KERNEL_CODE = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom,
                    ast.Global, ast.Nonlocal, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp, ast.SetComp,
                    ast.DictComp, ast.GeneratorExp)


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


@dataclass(frozen=True)
class AutotuneConfig:
    """One ``triton.Config`` of an autotune decorator: its constexpr values, ``num_warps`` and ``num_stages``."""

    values: tuple[tuple[str, int], ...]
    num_warps: int = 4
    num_stages: int = 3


@dataclass(frozen=True)
class Autotune:
    """A kernel's ``@triton.autotune`` as read from its cell."""

    configs: tuple[AutotuneConfig, ...]
    key: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"configs": [dict(c.values) | {"num_warps": c.num_warps, "num_stages": c.num_stages}
                            for c in self.configs], "key": list(self.key)}


def _is_autotune(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "triton.autotune"


def is_triton_jit(node: ast.stmt) -> bool:
    """A top-level function decorated with exactly ``@triton.jit``, or ``@triton.autotune(...)`` above it."""
    if not isinstance(node, ast.FunctionDef) or not node.decorator_list:
        return False
    *above, last = node.decorator_list
    return ast.unparse(last) == "triton.jit" and (not above or (len(above) == 1 and _is_autotune(above[0])))


def _int(node: ast.expr) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _config(node: ast.expr, constexprs: set[str], n: int) -> AutotuneConfig | str:
    """Config ``n`` (from 1) of an autotune list, or why it is not one written as literals."""
    where = f"line {node.lineno}: autotune config {n}"
    form = "triton.Config({\"NAME\": int, ...}, num_warps=int, num_stages=int)"
    if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "triton.Config" and len(node.args) == 1
            and isinstance(node.args[0], ast.Dict)):
        return f"{where} must be {form}"
    values = []
    for key, value in zip(node.args[0].keys, node.args[0].values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or _int(value) is None:
            return f"{where}: its dict must map names (strings) to integers"
        if key.value not in constexprs:
            return f"{where} sets {key.value}, which is not a tl.constexpr parameter of the kernel"
        if not 0 <= _int(value) <= MAX_BLOCK_SIZE:
            return f"{where} sets {key.value} to {_int(value)}; a config's values are from 0 to {MAX_BLOCK_SIZE}"
        values.append((key.value, _int(value)))
    options = {}
    for keyword in node.keywords:
        if keyword.arg not in ("num_warps", "num_stages") or _int(keyword.value) is None:
            return f"{where}: its only keywords are num_warps and num_stages, integers ({form})"
        options[keyword.arg] = _int(keyword.value)
    if options.get("num_warps", 4) not in NUM_WARPS:
        return f"{where}: num_warps must be one of {NUM_WARPS}"
    if not 1 <= options.get("num_stages", 3) <= MAX_STAGES:
        return f"{where}: num_stages must be from 1 to {MAX_STAGES}"
    return AutotuneConfig(tuple(values), **options)


def read_autotune(fn: ast.FunctionDef) -> tuple[Autotune | None, list[str]]:
    """``fn``'s ``@triton.autotune`` (None without one) and what in it is not written as the module's docstring
    says, each as ``line N: why``."""
    decorator = next((d for d in fn.decorator_list if _is_autotune(d)), None)
    if decorator is None:
        return None, []
    where = f"line {decorator.lineno}: @triton.autotune"
    keywords = {k.arg: k.value for k in decorator.keywords}
    if decorator.args or set(keywords) != {"configs", "key"}:
        return None, [f"{where} takes exactly configs=[triton.Config(...), ...] and key=[...], nothing else"]
    configs, key = keywords["configs"], keywords["key"]
    if not isinstance(configs, ast.List) or not 1 <= len(configs.elts) <= MAX_AUTOTUNE_CONFIGS:
        count = f"{len(configs.elts)} configs" if isinstance(configs, ast.List) else "no list"
        return None, [f"{where}: configs must be a list of 1 to {MAX_AUTOTUNE_CONFIGS} triton.Config(...) (the cap "
                      f"on autotune configs, each compiled and timed by the grader), got {count}"]
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
    constexprs = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
                  if a.annotation is not None and ast.unparse(a.annotation) == "tl.constexpr"}
    read = [_config(c, constexprs, n) for n, c in enumerate(configs.elts, start=1)]
    problems = [r for r in read if isinstance(r, str)]
    if not (isinstance(key, ast.List) and all(isinstance(k, ast.Constant) and k.value in params for k in key.elts)):
        problems.append(f"{where}: key must be a list of the kernel's parameter names, as strings")
    if problems:
        return None, problems
    return Autotune(tuple(read), tuple(k.value for k in key.elts)), []


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


def kernel_problems(tree: ast.Module) -> list[str]:
    """What in the ``@triton.jit`` functions of ``tree`` is not kernel code (see the module's docstring), each
    as ``line N: why``; [] when nothing is."""
    jitted = [n for n in tree.body if is_triton_jit(n)]
    jit_names = {n.name for n in jitted}
    known = jit_names | {"tl"} | BUILTINS
    problems = []
    for fn in jitted:
        problems += read_autotune(fn)[1]
        args = fn.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
        own = {a.arg for a in params} | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                                          and isinstance(n.ctx, ast.Store)}
        for default in [*args.defaults, *filter(None, args.kw_defaults)]:
            if not _literal(default):
                problems.append(f"line {default.lineno}: a default value of {fn.name} must be a literal, not "
                                f"{ast.unparse(default)}")
        parts = [*params, *args.defaults, *filter(None, args.kw_defaults), *fn.body, *filter(None, [fn.returns])]
        nodes = [n for part in parts for n in ast.walk(part)]
        chained = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        for node in nodes:
            if isinstance(node, ast.Name) and node.id == "tl" and node.id not in own and id(node) not in chained:
                problems.append(f"line {node.lineno}: {fn.name} uses tl itself; a kernel uses only what it holds "
                                f"(tl.load, tl.float32, ...)")
            elif isinstance(node, ast.Name) and node.id in jit_names - own and id(node) not in called:
                problems.append(f"line {node.lineno}: {fn.name} uses {node.id} other than by calling it")
            elif isinstance(node, _NOT_KERNEL_CODE):
                problems.append(f"line {node.lineno}: {type(node).__name__} is not Triton kernel code")
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in own | known:
                problems.append(f"line {node.lineno}: {fn.name} uses {node.id}; a kernel may use its arguments, "
                                f"its own variables, tl, the cell's other @triton.jit functions and "
                                f"{', '.join(sorted(BUILTINS))}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                problems.append(f"line {node.lineno}: {fn.name} uses the attribute {node.attr}; a kernel uses "
                                f"none that begins with _")
    return problems


def tl_chains(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """Each whole attribute chain of ``source`` that begins at ``tl`` (``tl.extra.cuda.libdevice.exp``), with its
    line, as the names after ``tl``."""
    tree = ast.parse(source)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            names, value = [], node
            while isinstance(value, ast.Attribute):
                names.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id == "tl":
                chains.append((node.lineno, tuple(reversed(names))))
    return chains


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
    kernel = TritonKernel("\n".join(kept).rstrip() + "\n", name)
    problems = [] if kernel.is_stub else kernel_problems(tree)   # a stub is never run
    if problems:
        raise TritonSourceError(f"{name}'s cell holds what is not Triton kernel code: " + "; ".join(problems[:3]))
    return kernel


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
    if fn is not None and not hasattr(fn, "__code__"):   # @triton.autotune's object holds the @triton.jit one
        fn = getattr(fn, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TritonSourceError(f"expected a kernel decorated with @triton.jit, got {type(kernel).__name__}")
    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        raise TritonSourceError(f"cannot read the cell that defines {fn.__name__}")
    return kernel_from_cell(text, fn.__name__)
