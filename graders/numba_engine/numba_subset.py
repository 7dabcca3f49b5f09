"""Check that a kernel's source stays inside the numba-CUDA kernel subset before anything of it runs.

On a real GPU numba's nopython CUDA compiler refuses anything outside its subset. In numba-cuda's simulator
(``NUMBA_ENABLE_CUDASIM=1``, the grader on CPU-only machines) a kernel body is plain Python run in the
grading process, so without this check it could call ``os.system``, climb ``().__class__.__bases__`` or
patch the grader's counters. `validate_kernel_source` reads the source's syntax tree, runs nothing, and
accepts only a whitelist; the first construct outside it raises `KernelSourceError` with a one-line message
naming the line (``line 4: os.system is not available in a CUDA kernel``).

What the source may hold:

- at top level: ``import math``, ``import numpy [as np]``, ``import numba [as nb]``, ``import numba.cuda as
  X``, ``from numba import cuda, types, <type names>``, ``from math import <names>``, ``from numpy import
  <dtype names>``; number constants (``TPB = 8``, ``TPB_2 = TPB + MAX_CONV``, ``SCALE = math.pi``); and
  functions with exactly one ``@cuda.jit`` decorator whose arguments are literals (``device=True``,
  ``"void(float32[:])"``);
- inside a function: assignments, ``if``/``for``/``while``/``break``/``continue``/``pass``/``return``,
  ``assert``, ``raise NotImplementedError()`` and a few other built-in errors, and expressions built from
  parameters, local variables, the constants, the source's own @cuda.jit functions, a few built-ins
  (`BUILTINS`), whitelisted dotted paths rooted at the imported modules (`KERNEL_PATHS`: thread indexing,
  shared/local/const arrays, atomics, synchronisation and warp intrinsics, the math module, dtype names),
  and on any other value only the attributes in `VALUE_ATTRIBUTES` (``a.shape``, ``z.real``);
- never a name or attribute that starts with ``_``, nor a module used as a value; no lambda, class, nested
  def, ``with``, ``try``, ``global``, ``import`` inside a function, ``del``, ``yield``, lists, dicts, sets
  or comprehensions; calls only to whitelisted paths, the built-ins (without keyword arguments) and the
  source's own @cuda.jit functions; ``@cuda.jit`` signature strings only made of numba type names (numba
  ``eval``s them when it compiles for a GPU).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field


class KernelSourceError(Exception):
    """The kernel cannot be sent to the grader (not a kernel, or it depends on something unsendable)."""


class KernelSubsetError(KernelSourceError):
    """A construct outside the numba-CUDA kernel subset, at ``lineno`` of the validated source."""

    def __init__(self, lineno: int, reason: str):
        super().__init__(f"line {lineno}: {reason}")
        self.lineno, self.reason = lineno, reason


# --- the whitelist ------------------------------------------------------------------------------------

# Modules a source may import, and the canonical root each one's paths are written with below.
MODULES = {"math": "math", "numpy": "np", "numba": "numba", "numba.cuda": "cuda", "numba.types": "numba.types"}

_NUMBA_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "boolean", "b1", "bool_", "complex64", "complex128", "intp", "uintp", "void",
                "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "c8", "c16")
_NUMPY_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "bool_", "complex64", "complex128", "intp", "uintp")
_MATH = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "comb", "copysign",
         "cos", "cosh", "degrees", "dist", "e", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "factorial",
         "floor", "fmod", "frexp", "fsum", "gamma", "gcd", "hypot", "inf", "isclose", "isfinite", "isinf",
         "isnan", "isqrt", "lcm", "ldexp", "lgamma", "log", "log10", "log1p", "log2", "modf", "nan",
         "nextafter", "perm", "pi", "pow", "prod", "radians", "remainder", "sin", "sinh", "sqrt", "sumprod",
         "tan", "tanh", "tau", "trunc", "ulp")
_CUDA = (
    *(f"{d}.{a}" for d in ("threadIdx", "blockIdx", "blockDim", "gridDim") for a in "xyz"),
    "grid", "gridsize", "laneid", "warpsize",
    "shared.array", "local.array", "const.array_like",
    "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
    "threadfence", "threadfence_block", "threadfence_system", "nanosleep",
    "activemask", "lanemask_lt", "all_sync", "any_sync", "eq_sync", "ballot_sync", "shfl_sync",
    "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "match_any_sync", "match_all_sync",
    *(f"atomic.{op}" for op in ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
                                "nanmax", "nanmin", "compare_and_swap", "cas")),
    "fma", "selp", "brev", "clz", "ffs", "popc", "cbrt",
    *(f"fp16.{op}" for op in ("hadd", "hsub", "hmul", "hdiv", "hfma", "hneg", "habs", "hsin", "hcos",
                              "hlog", "hlog10", "hlog2", "hexp", "hexp10", "hexp2", "hsqrt", "hrsqrt",
                              "hceil", "hfloor", "hrcp", "htrunc", "hrint", "heq", "hne", "hge", "hgt",
                              "hle", "hlt", "hmax", "hmin")),
    *_NUMBA_TYPES,
)
CONSTANT_PATHS = frozenset({"math.pi", "math.e", "math.tau", "math.inf", "math.nan",
                            "np.pi", "np.e", "np.inf", "np.nan"})
# Full dotted paths (canonical roots, see MODULES) a kernel may use: read, call or subscript.
KERNEL_PATHS = frozenset({
    *(f"cuda.{p}" for p in _CUDA),
    *(f"math.{p}" for p in _MATH),
    *(f"np.{t}" for t in _NUMPY_TYPES), *CONSTANT_PATHS,
    *(f"numba.{t}" for t in _NUMBA_TYPES),
    *(f"numba.types.{t}" for t in (*_NUMBA_TYPES, "float16")),
})
SIGNATURE_NAMES = frozenset({*_NUMBA_TYPES, "float16", "none"})
DECORATOR = "cuda.jit"
DECORATOR_KEYWORDS = frozenset({"device", "inline", "forceinline", "debug", "opt", "lineinfo", "fastmath",
                                "max_registers", "launch_bounds", "boundscheck", "lto",
                                "shared_memory_carveout"})

BUILTINS = frozenset({"range", "min", "max", "abs", "int", "float", "bool", "complex", "len", "round",
                      "pow", "divmod", "enumerate", "zip", "print"})
RAISABLE = frozenset({"NotImplementedError", "ValueError", "IndexError", "RuntimeError", "AssertionError",
                      "ZeroDivisionError", "ArithmeticError", "TypeError"})
# Attributes allowed on values that are not modules (arrays, thread indices, numbers).
VALUE_ATTRIBUTES = frozenset({"shape", "size", "ndim", "x", "y", "z", "real", "imag"})
_ANNOTATION_BUILTINS = frozenset({"int", "float", "bool", "complex"})

_NOT_IN_KERNEL = {
    ast.Lambda: "lambda", ast.ClassDef: "a class", ast.Global: "global", ast.Nonlocal: "nonlocal",
    ast.With: "a with statement", ast.AsyncWith: "async with", ast.Try: "a try statement",
    ast.Import: "import inside a kernel", ast.ImportFrom: "import inside a kernel",
    ast.FunctionDef: "a function defined inside a function",
    ast.AsyncFunctionDef: "async def", ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await",
    ast.Delete: "del", ast.Match: "a match statement", ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator expression", ast.Dict: "a dict", ast.Set: "a set", ast.List: "a list",
}
if hasattr(ast, "TryStar"):
    _NOT_IN_KERNEL[ast.TryStar] = "a try statement"


def _not_available(what: str, hint: str = "") -> str:
    return f"{what} is not available in a CUDA kernel" + (f" ({hint})" if hint else "")


# --- module level -------------------------------------------------------------------------------------

@dataclass
class _Module:
    """What the top level of the source binds, by kind."""

    modules: dict[str, str] = field(default_factory=dict)    # alias -> canonical root ("cuda", "np")
    leaves: dict[str, str] = field(default_factory=dict)     # from-imported name -> canonical path
    constants: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    dropped: frozenset[str] = frozenset()                    # names the caller left out of the source

    def kind(self, name: str) -> str | None:
        if name in self.modules:
            return f"module {self.modules[name]}"
        if name in self.leaves:
            return self.leaves[name]
        if name in self.constants:
            return "a constant"
        if name in self.functions:
            return "a function"
        return None

    def path(self, node: ast.expr) -> str | None:
        """The canonical dotted path of ``node`` if it is a chain of attributes on an imported module."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.modules:
            return None
        path = ".".join([self.modules[node.id], *reversed(attrs)])
        return "cuda" + path[len("numba.cuda"):] if path.startswith("numba.cuda.") else path


def validate_kernel_source(source: str) -> None:
    """Raise `KernelSourceError` unless ``source`` is made of numba-CUDA kernel code only (see module doc)."""
    tree = parse(source, "the kernel source")
    validate_module(tree.body)


def parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""   # a NUL byte is a SyntaxError without a line
        raise KernelSourceError(f"{what} does not parse: {where}{exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise KernelSourceError(f"{what} does not parse: {type(exc).__name__}") from None


def validate_module(body: list[ast.stmt], dropped: frozenset[str] = frozenset()) -> None:
    """Validate top-level statements; ``dropped`` names were left out by the caller (for friendlier errors)."""
    try:
        _validate_module(body, dropped)
    except RecursionError:
        raise KernelSourceError("the kernel is nested too deeply to be checked") from None


def _validate_module(body: list[ast.stmt], dropped: frozenset[str]) -> None:
    module = _Module(dropped=dropped)
    functions: list[ast.FunctionDef] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            _check_import(node, module)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            _check_constant_assignment(node, module)
        elif isinstance(node, ast.FunctionDef):
            _check_function_header(node, module)
            _bind(module, node.name, "function", node.lineno)
            functions.append(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            pass    # a docstring
        elif isinstance(node, ast.AsyncFunctionDef | ast.ClassDef):
            raise KernelSubsetError(node.lineno, _not_available(_NOT_IN_KERNEL[type(node)]))
        else:
            raise KernelSubsetError(node.lineno, "only imports of numba, math and numpy, number constants "
                                    "and @cuda.jit functions may stand outside a kernel")
    for fn in functions:
        _Function(fn, module).check()


def _bind(module: _Module, name: str, kind: str, lineno: int, target: str = "") -> None:
    """Bind a top-level name; a name keeps one kind (and an import alias one target)."""
    _check_identifier(name, lineno)
    tables = {"module": module.modules, "leaf": module.leaves}
    if kind in tables:
        same = tables[kind].get(name) == target
    else:
        same = name in (module.constants if kind == "constant" else module.functions)
    current = module.kind(name)
    if current is not None and not same:
        raise KernelSubsetError(lineno, f"{name} already names {current}; give it another name")
    if kind in tables:
        tables[kind][name] = target
    else:
        (module.constants if kind == "constant" else module.functions).add(name)


def _check_identifier(name: str, lineno: int) -> None:
    if name.startswith("_"):
        raise KernelSubsetError(lineno, _not_available(name, "no names starting with _"))


def _check_import(node: ast.Import | ast.ImportFrom, module: _Module) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name not in MODULES:
                raise KernelSubsetError(node.lineno, _not_available(f"import {alias.name}"))
            if alias.asname:
                _bind(module, alias.asname, "module", node.lineno, MODULES[alias.name])
            else:   # ``import numba.cuda`` binds ``numba``
                root = alias.name.split(".")[0]
                _bind(module, root, "module", node.lineno, MODULES[root])
        return
    if node.level or node.module not in MODULES:
        names = ", ".join(a.name for a in node.names)
        raise KernelSubsetError(node.lineno, _not_available(
            f"from {'.' * node.level}{node.module or ''} import {names}"))
    for alias in node.names:
        if alias.name == "*":
            raise KernelSubsetError(node.lineno, _not_available(f"from {node.module} import *"))
        name = alias.asname or alias.name
        _check_identifier(alias.name, node.lineno)
        full = f"{node.module}.{alias.name}"
        if full in MODULES:
            _bind(module, name, "module", node.lineno, MODULES[full])
            continue
        root = MODULES[node.module]
        path = f"{root}.{alias.name}"
        if path not in KERNEL_PATHS:
            raise KernelSubsetError(node.lineno, _not_available(full))
        _bind(module, name, "leaf", node.lineno, path)


def _check_constant_assignment(node: ast.Assign | ast.AnnAssign, module: _Module) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if not all(isinstance(t, ast.Name) for t in targets) or node.value is None:
        raise KernelSubsetError(node.lineno, "outside a kernel only number constants can be assigned "
                                "(NAME = number)")
    if isinstance(node, ast.AnnAssign):
        _check_annotation(node.annotation, module)
    names = ", ".join(t.id for t in targets)
    if not _is_constant_expression(node.value, module):
        raise KernelSubsetError(node.lineno, f"{names} must be a number, or arithmetic on numbers and "
                                "constants defined above it")
    for t in targets:
        _bind(module, t.id, "constant", node.lineno)


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
               ast.BitOr, ast.BitAnd, ast.BitXor)


def _is_constant_expression(node: ast.expr, module: _Module) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float, bool)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub | ast.UAdd | ast.Invert) \
            and _is_constant_expression(node.operand, module)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _ARITHMETIC) and _is_constant_expression(node.left, module) \
            and _is_constant_expression(node.right, module)
    if isinstance(node, ast.Name):
        return node.id in module.constants
    if isinstance(node, ast.Attribute):
        return module.path(node) in CONSTANT_PATHS
    return False


def _is_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None or type(node.value) in (int, float, bool, str)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)
    if isinstance(node, ast.Tuple | ast.List):
        return all(_is_literal(e) for e in node.elts)
    return False


def _check_annotation(node: ast.expr | None, module: _Module) -> None:
    """Annotations run when the function is defined: a string, a type name, or a type subscripted by literals."""
    if node is None:
        return
    ok = _is_literal(node) or _is_type_expression(node, module)
    if not ok:
        raise KernelSubsetError(node.lineno, "an annotation must be a string or a type name, not "
                                f"{_short(node)}")


def _is_type_expression(node: ast.expr, module: _Module) -> bool:
    if isinstance(node, ast.Name):
        return node.id in _ANNOTATION_BUILTINS or node.id in module.leaves
    if isinstance(node, ast.Attribute):
        return module.path(node) in KERNEL_PATHS
    if isinstance(node, ast.Subscript):
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return _is_type_expression(node.value, module) and all(
            _is_literal(i) or isinstance(i, ast.Slice) and all(
                p is None or _is_literal(p) for p in (i.lower, i.upper, i.step)) for i in index)
    return False


def _check_function_header(fn: ast.FunctionDef, module: _Module) -> None:
    """What runs when the ``def`` runs: the decorator, default values and annotations."""
    if len(fn.decorator_list) != 1:
        raise KernelSubsetError(fn.lineno, f"{fn.name} needs exactly one decorator, @cuda.jit")
    decorator = fn.decorator_list[0]
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if module.path(target) != DECORATOR:
        raise KernelSubsetError(decorator.lineno, f"{fn.name} needs exactly one decorator, @cuda.jit, not "
                                f"@{_short(decorator)}")
    if isinstance(decorator, ast.Call):
        for arg in decorator.args:
            if not _is_literal(arg):
                raise KernelSubsetError(decorator.lineno, "the arguments of @cuda.jit must be literals "
                                        f"(strings, numbers, True/False), not {_short(arg)}")
            # numba eval()s a signature string when it compiles for a GPU: only type expressions may pass
            for sig in (arg.elts if isinstance(arg, ast.Tuple | ast.List) else [arg]):
                if isinstance(sig, ast.Constant) and isinstance(sig.value, str) \
                        and not _is_signature(sig.value):
                    raise KernelSubsetError(decorator.lineno, f"{sig.value[:40]!r} is not a signature made of "
                                            "numba type names (e.g. 'void(float32[:], int32)')")
        for kw in decorator.keywords:
            if kw.arg not in DECORATOR_KEYWORDS:
                raise KernelSubsetError(decorator.lineno, _not_available(f"@cuda.jit({kw.arg or '**'}=...)"))
            if not _is_literal(kw.value):
                raise KernelSubsetError(decorator.lineno, f"@cuda.jit({kw.arg}=...) must be a literal, not "
                                        f"{_short(kw.value)}")
    args = fn.args
    if args.kwarg is not None:
        raise KernelSubsetError(fn.lineno, _not_available(f"**{args.kwarg.arg}"))
    for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        if not (_is_literal(default) or _is_constant_expression(default, module)):
            raise KernelSubsetError(default.lineno, f"a default value must be a literal, not {_short(default)}")
    for arg in _parameters(fn):
        _check_annotation(arg.annotation, module)
    _check_annotation(fn.returns, module)


def _is_signature(text: str) -> bool:
    """A signature string such as ``"void(float32[:, ::1], int32)"``: type names, calls, subscripts, slices."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in SIGNATURE_NAMES:
                return False
        elif isinstance(node, ast.Constant):
            if node.value is not None and type(node.value) is not int:
                return False
        elif isinstance(node, ast.Call):
            if node.keywords:
                return False
        elif not isinstance(node, ast.Expression | ast.Subscript | ast.Slice | ast.Tuple | ast.Load):
            return False
    return True


def _parameters(fn: ast.FunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs]


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- inside a function --------------------------------------------------------------------------------

class _Function:
    """Checks one @cuda.jit function's body against the module's bindings."""

    def __init__(self, fn: ast.FunctionDef, module: _Module):
        self.fn, self.module = fn, module
        self.params = {a.arg for a in _parameters(fn)}
        self.locals: set[str] = set()

    def check(self) -> None:
        for arg in _parameters(self.fn):
            self._check_binding(arg.arg, arg.lineno)
        for node in ast.walk(ast.Module(body=self.fn.body, type_ignores=[])):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self._check_binding(node.id, node.lineno)
                self.locals.add(node.id)
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                self._check_binding(node.target.id, node.lineno)
                self.locals.add(node.target.id)
        self.statements(self.fn.body)

    def _check_binding(self, name: str, lineno: int) -> None:
        _check_identifier(name, lineno)
        if name in self.module.modules or name in self.module.leaves:
            raise KernelSubsetError(lineno, f"{name} already names {self.module.kind(name)}; give your "
                                    "variable another name")

    def _variable(self, name: str) -> bool:
        return name in self.params or name in self.locals

    # statements

    def statements(self, body: list[ast.stmt]) -> None:
        for node in body:
            self.statement(node)

    def statement(self, node: ast.stmt) -> None:
        if type(node) in _NOT_IN_KERNEL:
            raise KernelSubsetError(node.lineno, _not_available(_NOT_IN_KERNEL[type(node)]))
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self.target(target)
            self.expr(node.value)
        elif isinstance(node, ast.AugAssign):
            self.target(node.target)
            self.expr(node.value)
        elif isinstance(node, ast.AnnAssign):
            _check_annotation(node.annotation, self.module)
            self.target(node.target)
            if node.value is not None:
                self.expr(node.value)
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.If | ast.While):
            self.expr(node.test)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.For):
            self.target(node.target)
            self.expr(node.iter)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value)
        elif isinstance(node, ast.Assert):
            self.expr(node.test)
            if node.msg is not None:
                self.expr(node.msg)
        elif isinstance(node, ast.Raise):
            self.raise_(node)
        elif not isinstance(node, ast.Pass | ast.Break | ast.Continue):
            raise KernelSubsetError(node.lineno, _not_available(f"the statement {type(node).__name__}"))

    def raise_(self, node: ast.Raise) -> None:
        exc = node.exc
        call = exc if isinstance(exc, ast.Call) else None
        name = call.func if call else exc
        if node.cause is not None or not isinstance(name, ast.Name) or name.id not in RAISABLE \
                or self._variable(name.id) or self.module.kind(name.id) is not None:
            raise KernelSubsetError(node.lineno, _not_available(
                f"raise {_short(exc) if exc else ''}".strip(), "raise one of " + ", ".join(sorted(RAISABLE))))
        if call:
            if call.keywords:
                raise KernelSubsetError(node.lineno, _not_available("keyword arguments to an exception"))
            for arg in call.args:
                self.expr(arg)

    def target(self, node: ast.expr) -> None:
        if isinstance(node, ast.Name):
            return      # checked with the other bindings
        if isinstance(node, ast.Subscript):
            self.expr(node.value)
            self.expr(node.slice)
        elif isinstance(node, ast.Tuple | ast.List):
            for elt in node.elts:
                self.target(elt)
        elif isinstance(node, ast.Starred):
            self.target(node.value)
        elif isinstance(node, ast.Attribute):
            raise KernelSubsetError(node.lineno, _not_available(f"assigning to an attribute ({_short(node)})"))
        else:
            raise KernelSubsetError(node.lineno, _not_available(f"assigning to {_short(node)}"))

    # expressions

    def expr(self, node: ast.expr) -> None:
        if type(node) in _NOT_IN_KERNEL:
            raise KernelSubsetError(node.lineno, _not_available(_NOT_IN_KERNEL[type(node)]))
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Subscript):
            self.expr(node.value)
            self.expr(node.slice)
        elif isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.expr(part)
        elif isinstance(node, ast.BinOp):
            self.expr(node.left)
            self.expr(node.right)
        elif isinstance(node, ast.UnaryOp):
            self.expr(node.operand)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self.expr(value)
        elif isinstance(node, ast.Compare):
            self.expr(node.left)
            for value in node.comparators:
                self.expr(value)
        elif isinstance(node, ast.IfExp):
            self.expr(node.test)
            self.expr(node.body)
            self.expr(node.orelse)
        elif isinstance(node, ast.Tuple):
            for elt in node.elts:
                self.expr(elt)
        elif isinstance(node, ast.Starred):
            self.expr(node.value)
        elif isinstance(node, ast.NamedExpr):
            self.expr(node.value)   # the target is a local, checked with the other bindings
        elif isinstance(node, ast.JoinedStr):
            for value in node.values:
                self.expr(value)
        elif isinstance(node, ast.FormattedValue):
            self.expr(node.value)
            if node.format_spec is not None:
                self.expr(node.format_spec)
        else:
            raise KernelSubsetError(node.lineno, _not_available(f"the expression {_short(node)}"))

    def name(self, node: ast.Name) -> None:
        name = node.id
        _check_identifier(name, node.lineno)
        if self._variable(name) or name in self.module.constants or name in self.module.functions \
                or name in self.module.leaves:
            return
        if name in self.module.modules:
            raise KernelSubsetError(node.lineno, _not_available(f"the module {name} as a value",
                                                                "use what it holds, e.g. cuda.threadIdx.x"))
        if name in BUILTINS:
            return
        self._unknown(name, name, node.lineno)

    def _unknown(self, name: str, what: str, lineno: int) -> None:
        hint = ("the grader keeps only numbers, @cuda.jit functions and numba, math and numpy imports from "
                "the cell") if name in self.module.dropped else ""
        raise KernelSubsetError(lineno, _not_available(what, hint))

    def attribute(self, node: ast.Attribute) -> None:
        attrs, root = [], node
        while isinstance(root, ast.Attribute):
            attrs.append(root.attr)
            root = root.value
        attrs.reverse()
        if not isinstance(root, ast.Name):
            self.expr(root)     # what the attributes are read from is checked first
        dotted = ".".join([_short(root, 24), *attrs])
        for attr in attrs:
            if attr.startswith("_"):
                raise KernelSubsetError(node.lineno, _not_available(dotted, "no names starting with _"))
        if isinstance(root, ast.Name) and not self._variable(root.id):
            _check_identifier(root.id, root.lineno)
            if root.id in self.module.modules:
                if self.module.path(node) not in KERNEL_PATHS:
                    raise KernelSubsetError(node.lineno, _not_available(dotted))
                return
            if self.module.kind(root.id) is None and root.id not in BUILTINS:
                self._unknown(root.id, dotted, node.lineno)
            if root.id not in self.module.constants:
                raise KernelSubsetError(node.lineno, _not_available(dotted))
        for attr in attrs:
            if attr not in VALUE_ATTRIBUTES:
                raise KernelSubsetError(node.lineno, _not_available(
                    dotted, f"a value offers only .{', .'.join(sorted(VALUE_ATTRIBUTES))}"))
        if isinstance(root, ast.Name):
            self.expr(root)

    def call(self, node: ast.Call) -> None:
        func = node.func
        builtin = False
        if isinstance(func, ast.Name):
            name = func.id
            _check_identifier(name, func.lineno)
            if self._variable(name) or name in self.module.constants:
                raise KernelSubsetError(node.lineno, _not_available(f"calling the variable {name}"))
            if name in self.module.modules:
                self.name(func)     # raises: a module is not callable
            if name not in self.module.functions and name not in self.module.leaves:
                if name not in BUILTINS:
                    self._unknown(name, name, func.lineno)
                builtin = True
        elif isinstance(func, ast.Attribute):
            root = func
            while isinstance(root, ast.Attribute):
                root = root.value
            if not (isinstance(root, ast.Name) and not self._variable(root.id) and root.id in self.module.modules):
                self.attribute(func)    # raises if the chain itself is not allowed
                raise KernelSubsetError(node.lineno, _not_available(f"calling {_short(func)}"))
            self.attribute(func)
        else:
            raise KernelSubsetError(node.lineno, "only CUDA intrinsics, math functions, number types and your "
                                    f"@cuda.jit functions can be called, not {_short(func)}")
        for arg in node.args:
            self.expr(arg)
        for kw in node.keywords:
            if kw.arg is None:
                raise KernelSubsetError(node.lineno, _not_available("** in a call"))
            if builtin:
                raise KernelSubsetError(node.lineno, _not_available(f"{func.id}({kw.arg}=...)"))
            _check_identifier(kw.arg, node.lineno)
            self.expr(kw.value)
