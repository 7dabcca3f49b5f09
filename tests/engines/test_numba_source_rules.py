"""What the numba grader sends as a kernel's source, pinned exactly: from a kernel object
(`graders.numba_engine.kernel_source`) and from a cell's text without running it (`graders.numba_engine.cell_source`).
Each rule of what is kept and what is left out, with the exact text sent or the exact message."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32
from puzzle_cells import run_cells

from graders.numba_engine import kernel_source as ks
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.kernel_source import KernelSourceError, kernel_source

PRELUDE = "from numba import cuda\nimport numba\nimport math\nimport numpy as np\n"


# --- from a kernel object -----------------------------------------------------------------------------

def test_the_source_sent_is_the_prelude_the_constants_and_the_functions_callees_first():
    ns = run_cells("TPB = 8\nNEG = -2\n\n@cuda.jit(device=True)\ndef twice(x):\n    return x * 2\n\n"
                   "@cuda.jit\ndef k(out, a, size):\n    i = cuda.threadIdx.x\n    out[i] = twice(a[i]) * TPB + NEG\n")
    assert kernel_source(ns["k"]) == (
        PRELUDE + "NEG = -2\nTPB = 8\n\n@cuda.jit(device=True)\ndef twice(x):\n    return x * 2\n\n"
        "@cuda.jit\ndef k(out, a, size):\n    i = cuda.threadIdx.x\n    out[i] = twice(a[i]) * TPB + NEG\n", "k")


def test_mutually_recursive_device_functions_are_sent_once_each():
    ns = run_cells("@cuda.jit(device=True)\ndef even(n):\n    return True if n == 0 else odd(n - 1)\n\n"
                   "@cuda.jit(device=True)\ndef odd(n):\n    return False if n == 0 else even(n - 1)\n\n"
                   "@cuda.jit\ndef k(out):\n    out[0] = even(4)\n")
    source, _ = kernel_source(ns["k"])
    assert source.count("def even") == source.count("def odd") == 1
    assert source.index("def odd") < source.index("def even") < source.index("def k")


@pytest.mark.parametrize("value, text", [
    (True, "True"), (False, "False"), (7, "7"), (np.int64(-3), "-3"), (2.5, "2.5"), (np.float32(0.5), "0.5"),
    (math.nan, "math.nan"), (math.inf, "math.inf"), (-math.inf, "-math.inf"),
])
def test_numbers_are_written_as_python_reads_them_back(value, text):
    assert ks._number(value) == text


@pytest.mark.parametrize("module, name, line", [
    ("math", "math", "import math"), ("numpy", "np", "import numpy as np"),
    ("numba.types", "types", "import numba.types as types"),
])
def test_modules_are_imported_under_the_name_the_kernel_uses(module, name, line):
    assert ks._import(module, name) == line


@pytest.mark.parametrize("value, path", [
    (float32, ("numba", "float32")), (np.float32, ("numpy", "float32")), (math.sqrt, ("math", "sqrt")),
    (np.sqrt, None), (len, None), (3, None),
])
def test_types_and_math_functions_are_imported_from_their_module(value, path):
    assert ks._type_or_function(value) == path


def test_a_math_function_and_a_type_under_other_names_are_imported_as_those_names():
    ns = run_cells("from math import sqrt as root\nfrom numba import float32 as f32\nimport os\n",
                   "@cuda.jit\ndef k(out, a):\n    out[0] = f32(root(a[0]))\n")
    source, _ = kernel_source(ns["k"])
    assert source == (PRELUDE + "from numba import float32 as f32\nfrom math import sqrt as root\n\n"
                      "@cuda.jit\ndef k(out, a):\n    out[0] = f32(root(a[0]))\n")


def test_a_module_outside_the_subset_is_left_out_so_the_check_names_its_line():
    ns = run_cells("import os\n\n@cuda.jit\ndef k(out):\n    out[0] = os.getpid()\n")
    with pytest.raises(KernelSourceError) as raised:
        kernel_source(ns["k"])
    assert str(raised.value) == "line 5: os.getpid is not available in a CUDA kernel"


def test_a_value_from_outside_the_cell_is_refused_with_its_name_and_type():
    ns = run_cells("LIMITS = {'x': 1}\n\n@cuda.jit\ndef k(out):\n    out[0] = LIMITS['x']\n")
    with pytest.raises(KernelSourceError) as raised:
        kernel_source(ns["k"])
    assert str(raised.value) == ("k uses 'LIMITS' (dict) from outside its cell; define it inside the cell as a "
                                 "number, or pass it in")


def test_a_kernel_is_a_cuda_jit_dispatcher():
    with pytest.raises(KernelSourceError) as raised:
        kernel_source(print)
    assert str(raised.value) == "expected a kernel decorated with @cuda.jit, got builtin_function_or_method"


def test_a_kernel_without_readable_source_is_refused():
    namespace: dict = {"cuda": cuda}
    exec(compile("@cuda.jit\ndef k(out):\n    out[0] = 1\n", "<nowhere>", "exec"), namespace)
    with pytest.raises(KernelSourceError, match="^cannot read the source of k: "):
        kernel_source(namespace["k"])


@pytest.mark.parametrize("lineno, message", [
    (1, "a reason"),                            # a prelude line: no line of the cell
    (6, "line 20: a reason (in twice)"),        # the first line of twice, defined at line 20 of its cell
    (7, "line 21: a reason (in twice)"),
    (8, "a reason"),                            # the blank line between bodies
    (9, "line 40: a reason"),                   # the kernel's first line
    (11, "line 42: a reason"),
    (12, "a reason"),                           # past the last body
])
def test_an_error_is_placed_on_the_line_of_the_cell_that_holds_it(lineno, message):
    head = "a\nb\nc\nd\n\n"                     # lines 1-5
    bodies = {"twice": "t1\nt2", "k": "k1\nk2\nk3"}   # lines 6-7, blank line 8, lines 9-11
    error = ks._in_cell(ks.KernelSubsetError(lineno, "a reason"), head, bodies, {"twice": 20, "k": 40}, "k")
    expected = message if "(in" not in message else message.replace(": a reason (in twice)", " (in twice): a reason")
    assert str(error) == expected


# --- from a cell's text ---------------------------------------------------------------------------------

def test_a_cell_keeps_its_allowed_imports_constants_and_jit_functions_in_order():
    cell = ("import numba\nimport os\nfrom numpy import float32\nimport numba, os\nfrom . import x\n"
            "TPB = 8\nNEG = -TPB\nPOS = +1.5\nLATER = EARLY\nEARLY = 2\nX = Y = 3\nA, B = 1, 2\nNAME = 'x'\n"
            "NOTHING = None\nFLAG = not 1\nPI2 = 2 * math.pi\nANN: int = 4\nBARE: int\n"
            "helper = os.getpid\n\n@cuda.jit(device=True)\ndef twice(x):\n    return x * 2\n\n"
            "@numba.cuda.jit\ndef k(out, a, size):\n    out[0] = twice(a[0]) + TPB\n\n"
            "@numba.jit\ndef cpu(x):\n    return x\n")
    assert kernel_source_from_cell(cell, "k") == "\n\n".join([
        *PRELUDE.splitlines(), "import numba", "from numpy import float32", "TPB = 8", "NEG = -TPB", "POS = +1.5",
        "EARLY = 2", "X = Y = 3", "PI2 = 2 * math.pi", "ANN: int = 4",
        "@cuda.jit(device=True)\ndef twice(x):\n    return x * 2",
        "@numba.cuda.jit\ndef k(out, a, size):\n    out[0] = twice(a[0]) + TPB"]) + "\n"


def test_a_kernel_using_what_was_left_out_is_told_what_the_grader_keeps():
    with pytest.raises(KernelSourceError) as raised:
        kernel_source_from_cell("helper = len\n\n@cuda.jit\ndef k(out, a, size):\n    out[0] = helper(a)\n", "k")
    assert str(raised.value) == ("line 5: helper is not available in a CUDA kernel (the grader keeps only numbers, "
                                 "@cuda.jit functions and numba, math and numpy imports from the cell)")


@pytest.mark.parametrize("statement", ["import os as helper", "from os import getpid as helper",
                                       "def helper(x):\n    return x", "class helper:\n    pass",
                                       "helper: int", "helper += 1", "helper = [1]"])
def test_every_kind_of_statement_left_out_is_named_in_the_error(statement):
    cell = f"{statement}\n\n@cuda.jit\ndef k(out):\n    out[0] = helper\n"
    with pytest.raises(KernelSourceError, match="the grader keeps only numbers"):
        kernel_source_from_cell(cell, "k")


def test_a_name_bound_by_a_kept_statement_is_not_called_left_out():
    cell = "SIZE = len('abc')\nSIZE = 3\n\n@cuda.jit\ndef k(out):\n    out[0] = SIZE\n"
    assert "SIZE = 3" in kernel_source_from_cell(cell, "k")


@pytest.mark.parametrize("decorator", ["@jit", "@numba.jit", "@cuda.autojit", "@vectorize"])
def test_only_cuda_jit_functions_are_kernels(decorator):
    with pytest.raises(KernelSourceError) as raised:
        kernel_source_from_cell(f"{decorator}\ndef k(out):\n    out[0] = 1\n", "k")
    assert str(raised.value) == "the cell defines no @cuda.jit function named k"


@pytest.mark.parametrize("newline", ["\r\n", "\r", "\n"])
def test_a_function_is_cut_from_the_cell_by_its_lines_whatever_their_ending(newline):
    """Python counts lines at \\r\\n, \\r and \\n only: a form feed inside a string is not a line end."""
    cell = newline.join(["TPB = 8", "NAME = 'a\x0cb\u2028c'", "", "@cuda.jit(device=False)", "def k(out):",
                         "    out[0] = TPB", ""])
    assert kernel_source_from_cell(cell, "k").endswith("TPB = 8\n\n@cuda.jit(device=False)\ndef k(out):\n"
                                                      "    out[0] = TPB\n")
