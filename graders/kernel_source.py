"""Turn a ``@cuda.jit`` kernel defined in a notebook into self-contained source a child process can run.

The grader never runs the student's kernel object itself: it sends source text to a fresh process. The
source is the kernel's own definition plus what it refers to: modules (``cuda``, ``numba``, ``math``),
numeric constants (``TPB = 8``), numba types (``float32``) and other ``@cuda.jit`` device functions.
"""
from __future__ import annotations

import inspect
import numbers
import textwrap
import types


# What a kernel cell may use without importing it itself (its decorator line needs ``cuda``).
PRELUDE = {"cuda": "from numba import cuda", "numba": "import numba", "math": "import math",
            "np": "import numpy as np"}


class KernelSourceError(Exception):
    """The kernel cannot be sent to the grader (not a kernel, or it depends on something unsendable)."""


def kernel_source(kernel) -> tuple[str, str]:
    """Return ``(source, name)`` for a numba ``@cuda.jit`` kernel (GPU or simulator dispatcher)."""
    fn = getattr(kernel, "py_func", None)
    if not isinstance(fn, types.FunctionType):
        raise KernelSourceError(
            f"expected a kernel decorated with @cuda.jit, got {type(kernel).__name__}")
    header: dict[str, str] = dict(PRELUDE)
    bodies: dict[str, str] = {}
    _collect(fn, header, bodies)
    return "\n".join(header.values()) + "\n\n" + "\n\n".join(bodies.values()) + "\n", fn.__name__


def _collect(fn: types.FunctionType, header: dict[str, str], bodies: dict[str, str]) -> None:
    if fn.__name__ in bodies:
        return
    bodies[fn.__name__] = ""          # placeholder: guards against mutual recursion
    for name in sorted(_global_names(fn.__code__)):
        if name not in fn.__globals__ or name in header:
            continue
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            header[name] = f"import {value.__name__} as {name}"
        elif isinstance(value, bool | numbers.Real):
            plain = value if isinstance(value, bool) else (
                int(value) if isinstance(value, numbers.Integral) else float(value))
            header[name] = f"{name} = {plain!r}"
        elif type(value).__module__.startswith("numba.core.types"):
            header[name] = f"import numba as _numba\n{name} = _numba.{value}"
        elif isinstance(getattr(value, "py_func", None), types.FunctionType):
            _collect(value.py_func, header, bodies)
        else:
            raise KernelSourceError(
                f"{fn.__name__} uses {name!r} ({type(value).__name__}) from outside its cell; "
                "define it inside the cell as a number, or pass it in")
    del bodies[fn.__name__]
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError) as exc:
        raise KernelSourceError(f"cannot read the source of {fn.__name__}: {exc}") from None
    bodies[fn.__name__] = textwrap.dedent(source)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names
