"""A ``ModelNew`` read from the text of its cell: parsed and held to the allowlist below before anything runs.

The submission is the whole solution cell: imports, ``@triton.jit`` kernels and ``class ModelNew(nn.Module)``.
Its host Python runs in the grading child (`graders.model_engine.child`) in the same process as the reference
and the checks, so the cell is held to what a model needs (`source_problems`), as the Triton engine holds a
kernel's cell (`graders.triton_engine.kernel_source`):

- top-level statements: imports of `ALLOWED_IMPORTS` only, ``@triton.jit`` functions (held to Triton's own
  kernel rules, `graders.triton_engine.kernel_source.kernel_problems`), classes and ``NAME = literal``;
- names: the cell's own definitions, the imported names, a function's arguments and variables, `BUILTINS`;
- attributes: none that begins with ``_`` (no ``__class__``, ``__globals__``, ``__subclasses__``, ``_C``) but
  ``__init__``, none in `DENIED_ATTRIBUTES` (hooks, ``torch.library``, native extensions, global switches,
  streams and events), and an attribute is assigned only on ``self``: a module (``torch``, ``F``) or a class
  (``torch.Tensor``) is never patched;
- no ``global``, ``nonlocal``, lambdas' escape hatches (``eval``, ``exec``, ``getattr``, ``type``, ``open``, ...
  are no builtin here), ``async`` or generators.

``torch.utils.cpp_extension.load_inline`` is refused: native code in the grading process could rewrite any
object the checks use. A CUDA C++ kernel is compiled and launched by the grader's `cuda_kernel`
(``from graders.model_engine.cuda_kernels import cuda_kernel``, `graders.model_engine.cuda_kernels`), whose host
side is the grader's.
"""
from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass

from graders.triton_engine.kernel_source import is_triton_jit, kernel_problems

CLASS_NAME = "ModelNew"
MAX_SOURCE_CHARS = 20_000
CUDA_KERNELS = "graders.model_engine.cuda_kernels"   # `cuda_kernel`, the grader's launcher of CUDA C++ kernels
ALLOWED_IMPORTS = {"torch": "torch", "torch.nn": "nn", "torch.nn.functional": "F", "math": "math",
                   "triton": "triton", "triton.language": "tl"}
BUILTINS = frozenset({"range", "len", "min", "max", "abs", "int", "float", "bool", "tuple", "list", "dict",
                      "isinstance", "super", "print", "enumerate", "zip", "sum", "round", "pow", "divmod",
                      "reversed", "sorted", "all", "any", "slice", "str", "ValueError", "RuntimeError",
                      "NotImplementedError", "AssertionError", "True", "False", "None"})
DENIED_ATTRIBUTES = frozenset({
    "library", "overrides", "utils", "hub", "ops", "backends", "jit", "compile", "compiler", "fx", "export",
    "autograd", "distributed", "multiprocessing", "func", "testing", "package", "profiler", "storage",
    "untyped_storage", "UntypedStorage", "from_file", "save", "load", "serialization", "Event", "Stream",
    "stream", "synchronize", "manual_seed", "seed", "random", "set_rng_state", "get_rng_state", "cuda_graph",
    "CUDAGraph", "graph", "apply", "data_ptr", "modules", "children", "parameters_hook", "globals", "builtins",
    "sys", "os", "gc", "inspect", "ctypes", "importlib", "subprocess", "threading", "Thread", "futures",
    "fork", "wait", "set_flush_denormal", "use_deterministic_algorithms"})
_DENIED_PREFIXES = ("set_", "register", "_")
_NOT_ALLOWED = (ast.Global, ast.Nonlocal, ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Await,
                ast.Yield, ast.YieldFrom)


class ModelSourceError(ValueError):
    """A ``ModelNew`` cannot be read from its cell or is outside the allowlist; the message says why."""


@dataclass(frozen=True)
class ModelSource:
    """A submission: the text of the cell that defines ``ModelNew``."""

    source: str

    @property
    def is_stub(self) -> bool:
        """Whether ``ModelNew.forward`` is still a release's stub: a body of ``...`` (`graders.notebook.MODEL_STUB`)
        or ``raise NotImplementedError()``."""
        for node in ast.walk(ast.parse(self.source)):
            if isinstance(node, ast.FunctionDef) and node.name == "forward":
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                return not body or (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
                                    and "NotImplementedError" in ast.unparse(body[0].exc))
        return False


def _denied(attr: str) -> bool:
    if attr == "__init__":
        return False
    return attr in DENIED_ATTRIBUTES or attr.startswith(_DENIED_PREFIXES) or "hook" in attr.lower()


def _import_problems(node: ast.stmt, bound: set[str]) -> list[str]:
    where = f"line {node.lineno}"
    if isinstance(node, ast.ImportFrom):
        names = tuple(alias.name for alias in node.names)
        if (node.module in ("torch", "triton") and names in (("nn",), ("language",))) \
                or (node.module == CUDA_KERNELS and names == ("cuda_kernel",)):
            alias = node.names[0]
            bound.add(alias.asname or alias.name)
            return []
        return [f"{where}: import only {', '.join(ALLOWED_IMPORTS)} (e.g. `import torch.nn.functional as F`), and "
                f"`from {CUDA_KERNELS} import cuda_kernel`"]
    problems = []
    for alias in node.names:
        if alias.name not in ALLOWED_IMPORTS:
            problems.append(f"{where}: {alias.name} is not importable here; a ModelNew may import "
                            f"{', '.join(ALLOWED_IMPORTS)}")
        else:
            bound.add(alias.asname or alias.name.split(".")[0])
    return problems


def source_problems(source: str) -> list[str]:
    """What in ``source`` is outside the allowlist (see the module's docstring), each as ``line N: why``."""
    tree = ast.parse(source)
    bound: set[str] = set()
    problems: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            problems += _import_problems(node, bound)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            if isinstance(node, ast.FunctionDef) and not is_triton_jit(node):
                problems.append(f"line {node.lineno}: a top-level function must be a @triton.jit kernel; put host "
                                f"code in {CLASS_NAME}'s methods")
            bound.add(node.name)
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            if not isinstance(node.value, ast.Constant):
                problems.append(f"line {node.lineno}: a top-level assignment must be NAME = a literal number or "
                                "string")
            bound.update(t.id for t in node.targets)
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            problems.append(f"line {node.lineno}: {type(node).__name__} at the top level; the cell may hold imports,"
                            f" @triton.jit kernels, classes and NAME = literal")
    jitted = [n for n in tree.body if is_triton_jit(n)]
    problems += kernel_problems(ast.Module(body=jitted, type_ignores=[]))
    host = [n for n in tree.body if not is_triton_jit(n)]
    locals_ = {n.id for part in host for n in ast.walk(part) if isinstance(n, ast.Name) and
               isinstance(n.ctx, (ast.Store, ast.Del))}
    locals_ |= {a.arg for part in host for n in ast.walk(part) if isinstance(n, ast.arguments)
                for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, *filter(None, (n.vararg, n.kwarg))]}
    locals_ |= {n.name for part in host for n in ast.walk(part) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    known = bound | locals_ | BUILTINS
    for part in host:
        for node in ast.walk(part):
            where = f"line {getattr(node, 'lineno', '?')}"
            if isinstance(node, _NOT_ALLOWED):
                problems.append(f"{where}: {type(node).__name__} is not allowed in a ModelNew's cell")
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
                problems.append(f"{where}: {node.id} is not defined by the cell, imported, or one of the allowed "
                                "builtins")
            elif isinstance(node, ast.Attribute) and _denied(node.attr):
                problems.append(f"{where}: the attribute {node.attr} is not allowed (no private attributes, hooks, "
                                "registries, global switches, streams, events or native extensions)")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in (t for tgt in targets for t in ast.walk(tgt)):
                    if isinstance(target, (ast.Attribute, ast.Subscript)) and not _on_self(target):
                        problems.append(f"{where}: only attributes of self are assigned, not "
                                        f"{ast.unparse(target)}")
    return problems


def _on_self(target: ast.expr) -> bool:
    """Whether an assigned ``target`` is ``self.NAME`` (or an item of a tensor bound to a local name)."""
    if isinstance(target, ast.Attribute):
        return isinstance(target.value, ast.Name) and target.value.id == "self"
    return isinstance(target, ast.Subscript) and isinstance(target.value, (ast.Name, ast.Attribute)) \
        and not (isinstance(target.value, ast.Name) and target.value.id in ALLOWED_IMPORTS.values())


def model_from_cell(cell: str) -> ModelSource:
    """The submission held in ``cell``: `ModelSourceError` when it does not parse, defines no ``ModelNew`` class,
    is longer than `MAX_SOURCE_CHARS` or is outside the allowlist."""
    if len(cell) > MAX_SOURCE_CHARS:
        raise ModelSourceError(f"the cell that defines {CLASS_NAME} holds {len(cell)} characters; the grader reads "
                               f"at most {MAX_SOURCE_CHARS} (the cap on a ModelNew's cell)")
    try:
        tree = ast.parse(cell)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ModelSourceError(f"the cell that defines {CLASS_NAME} does not parse: {exc}") from None
    if not any(isinstance(n, ast.ClassDef) and n.name == CLASS_NAME for n in tree.body):
        raise ModelSourceError(f"the cell defines no class {CLASS_NAME}")
    found = ModelSource(cell)
    problems = [] if found.is_stub else source_problems(cell)
    if problems:
        raise ModelSourceError(f"{CLASS_NAME}'s cell holds what the grader does not run: " + "; ".join(problems[:3]))
    return found


def model_from_class(model) -> ModelSource:
    """The submission a notebook's ``ModelNew`` class was defined by, read from the text of its cell (IPython
    keeps each cell's text where ``linecache`` finds it) or file; a `ModelSource` (what the trusted grader read
    from the submitted notebook) held to `model_from_cell`'s checks."""
    if isinstance(model, ModelSource):
        return model_from_cell(model.source)
    code = getattr(getattr(model, "forward", None), "__code__", None)
    if code is None or getattr(model, "__name__", "") != CLASS_NAME:
        raise ModelSourceError(f"expected the class {CLASS_NAME}, got {type(model).__name__}")
    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        raise ModelSourceError(f"cannot read the cell that defines {CLASS_NAME}")
    return model_from_cell(text)
