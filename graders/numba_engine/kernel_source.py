"""Turn a ``@cuda.jit`` kernel defined in a notebook into self-contained source a child process can run.

The grader never runs the student's kernel object itself: it sends source text to a fresh process. The
source is the kernel's own definition plus what it refers to: modules (``cuda``, ``numba``, ``math``),
numeric constants (``TPB = 8``), numba and numpy types (``float32``), math functions (``sqrt``) and other
``@cuda.jit`` device functions. The result is checked against the numba-CUDA kernel subset
(`graders.numba_engine.numba_subset`) before it is returned: anything else is a `KernelSourceError` naming the line of
the cell where it stands.
"""
from __future__ import annotations

import inspect
import math
import numbers
import textwrap
import types
from dataclasses import dataclass

import numpy as np

from graders.numba_engine.numba_subset import (  # noqa: F401 (re-exported)
    KERNEL_PATHS,
    MODULES,
    KernelSourceError,
    KernelSubsetError,
    validate_kernel_source,
)


@dataclass(frozen=True)
class SubmittedKernel:
    """A numba kernel as read from a submitted file (`graders.submission`): self-contained source and name."""

    source: str
    name: str


# What a kernel cell may use without importing it itself (its decorator line needs ``cuda``).
PRELUDE = {"cuda": "from numba import cuda", "numba": "import numba", "math": "import math",
           "np": "import numpy as np"}


def kernel_source(kernel) -> tuple[str, str]:
    """Return ``(source, name)`` for a numba ``@cuda.jit`` kernel (GPU or simulator dispatcher)."""
    fn = getattr(kernel, "py_func", None)
    if not isinstance(fn, types.FunctionType):
        raise KernelSourceError(
            f"expected a kernel decorated with @cuda.jit, got {type(kernel).__name__}")
    header: dict[str, str] = dict(PRELUDE)
    bodies: dict[str, str] = {}
    first_lines: dict[str, int] = {}
    _collect(fn, header, bodies, first_lines)
    head = "\n".join(header.values()) + "\n\n"
    source = head + "\n\n".join(bodies.values()) + "\n"
    try:
        validate_kernel_source(source)
    except KernelSubsetError as exc:
        raise _in_cell(exc, head, bodies, first_lines, fn.__name__) from None
    return source, fn.__name__


def _in_cell(exc: KernelSubsetError, head: str, bodies: dict[str, str], first_lines: dict[str, int],
             kernel: str) -> KernelSourceError:
    """The error with its line counted in the cell that defines the function (not in the sent source)."""
    start = head.count("\n") + 1
    for name, body in bodies.items():
        length = body.count("\n") + 1
        if start <= exc.lineno < start + length:
            line = first_lines[name] + exc.lineno - start
            where = f"line {line}" if name == kernel else f"line {line} (in {name})"
            return KernelSourceError(f"{where}: {exc.reason}")
        start += length + 1      # the blank line between bodies
    return KernelSourceError(exc.reason)   # a line made here from a value the kernel uses: no cell line


def _collect(fn: types.FunctionType, header: dict[str, str], bodies: dict[str, str],
             first_lines: dict[str, int]) -> None:
    if fn.__name__ in bodies:
        return
    bodies[fn.__name__] = ""          # placeholder: guards against mutual recursion
    for name in sorted(_global_names(fn.__code__)):
        if name not in fn.__globals__ or name in header:
            continue
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            # Other modules are left out: the check then names the line that uses them.
            module = {"numba.core.types": "numba.types"}.get(value.__name__, value.__name__)
            if module in MODULES:
                header[name] = _import(module, name)
        elif isinstance(value, bool | numbers.Real):
            header[name] = f"{name} = {_number(value)}"
        elif (path := _type_or_function(value)) is not None:
            module, leaf = path
            header[name] = f"from {module} import {leaf}" + ("" if leaf == name else f" as {name}")
        elif isinstance(getattr(value, "py_func", None), types.FunctionType):
            _collect(value.py_func, header, bodies, first_lines)
        else:
            raise KernelSourceError(
                f"{fn.__name__} uses {name!r} ({type(value).__name__}) from outside its cell; "
                "define it inside the cell as a number, or pass it in")
    del bodies[fn.__name__]
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError) as exc:
        raise KernelSourceError(f"cannot read the source of {fn.__name__}: {exc}") from None
    bodies[fn.__name__] = textwrap.dedent(source).rstrip("\n")
    first_lines[fn.__name__] = fn.__code__.co_firstlineno


def _import(module: str, name: str) -> str:
    return f"import {module}" if module == name else f"import {module} as {name}"


def _number(value) -> str:
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return repr(int(value))
    value = float(value)
    if math.isnan(value):
        return "math.nan"
    if math.isinf(value):
        return "math.inf" if value > 0 else "-math.inf"
    return repr(value)


def _type_or_function(value) -> tuple[str, str] | None:
    """``(module, name)`` to import a numba type, numpy scalar type or math function by, if allowed."""
    if type(value).__module__.startswith("numba.core.types"):
        module, leaf, root = "numba", str(value), "numba"
    elif isinstance(value, type) and issubclass(value, np.generic):
        leaf = next((t for t in dir(np) if f"np.{t}" in KERNEL_PATHS and getattr(np, t) is value), "")
        module, root = "numpy", "np"
    elif isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) == "math":
        module, leaf, root = "math", value.__name__, "math"
    else:
        return None
    return (module, leaf) if f"{root}.{leaf}" in KERNEL_PATHS else None


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names
