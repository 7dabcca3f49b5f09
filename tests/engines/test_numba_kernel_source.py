"""Sending a notebook kernel to the grader as self-contained source."""
import pytest
from puzzle_cells import run_cells

from graders.numba_engine.kernel_source import KernelSourceError, kernel_source

CELL = '''
TPB = 8
SCALE = 2.5

@cuda.jit(device=True)
def twice(x):
    return x * 2

@cuda.jit
def kernel(out, a, size):
    cache = cuda.shared.array(TPB, numba.float32)
    i = cuda.threadIdx.x
    out[i] = twice(a[i]) * SCALE
'''


def test_source_carries_constants_modules_and_device_functions():
    source, name = kernel_source(run_cells(CELL)["kernel"])
    assert name == "kernel"
    for line in ("TPB = 8", "SCALE = 2.5", "import numba", "def twice(x):", "def kernel(out"):
        assert line in source
    namespace: dict = {}
    exec(compile(source, "<sent>", "exec"), namespace)   # runs on its own
    assert namespace["kernel"].py_func.__name__ == "kernel"


def test_plain_function_is_refused():
    with pytest.raises(KernelSourceError, match="@cuda.jit"):
        kernel_source(lambda out: None)


def test_python_object_from_another_cell_is_refused_with_its_name():
    ns = run_cells("TABLE = [1, 2]\n\n@cuda.jit\ndef k(out):\n    out[0] = TABLE[0]\n")
    with pytest.raises(KernelSourceError, match="'TABLE' \\(list\\)"):
        kernel_source(ns["k"])


def test_types_and_math_functions_from_other_cells_are_carried_as_imports():
    ns = run_cells("from numba import float32\nfrom math import sqrt\nimport numpy\nfrom numba import types\n"
                   "LIMIT = float('inf')\n",
                   "@cuda.jit\ndef k(out, a, size):\n    i = cuda.threadIdx.x\n"
                   "    out[i] = float32(sqrt(a[i])) + numpy.float32(LIMIT) + types.int32(1)\n")
    source, _ = kernel_source(ns["k"])
    for line in ("from numba import float32", "from math import sqrt", "import numpy",
                 "import numba.types as types", "LIMIT = math.inf"):
        assert line in source
    namespace: dict = {}
    exec(compile(source, "<sent>", "exec"), namespace)


def test_code_outside_the_kernel_subset_is_refused_with_the_line_of_its_cell():
    ns = run_cells("import os\n\n@cuda.jit(device=True)\ndef helper(x):\n    return os.getpid()\n",
                   "@cuda.jit\ndef k(out, a, size):\n    i = cuda.threadIdx.x\n    out[i] = helper(a[i])\n")
    with pytest.raises(KernelSourceError, match=r"^line 5 \(in helper\): os\.getpid is not available"):
        kernel_source(ns["k"])
    ns = run_cells("@cuda.jit\ndef k(out, a, size):\n    i = cuda.threadIdx.x\n    out[i] = a.ctypes.data\n")
    with pytest.raises(KernelSourceError, match=r"^line 4: a\.ctypes\.data is not available"):
        kernel_source(ns["k"])


def test_only_what_the_kernel_subset_allows_is_carried_as_an_import():
    import cmath

    import numba
    import numpy as np

    from graders.numba_engine import kernel_source as ks
    assert ks._type_or_function(cmath.sqrt) is None          # a builtin of another module, though math has sqrt
    assert ks._type_or_function(np.datetime64) is None       # a numpy scalar type outside the subset
    assert ks._type_or_function(numba.types.unicode_type) is None   # a numba type outside the subset
    assert ks._type_or_function(np.float64) == ("numpy", "float64")


def test_names_used_only_inside_a_nested_code_object_are_collected_with_the_outer_ones():
    from graders.numba_engine import kernel_source as ks

    def uses(values):
        return [TPB * v for v in values] + [len(values)]   # noqa: F821 (a global the kernel's cell would define)
    assert ks._global_names(uses.__code__) == {"TPB", "len"}


def test_a_type_imported_under_its_own_name_is_imported_without_an_alias():
    ns = run_cells("from numba import float32\n",
                   "@cuda.jit\ndef k(out, a):\n    out[0] = float32(a[0])\n")
    source, _ = kernel_source(ns["k"])
    assert "\nfrom numba import float32\n" in source and " as float32" not in source


def test_the_body_is_sent_as_written_to_its_last_character():
    ns = run_cells("MAX = 3\n\n@cuda.jit\ndef k(out):\n    out[0] = MAX   \n")
    source, _ = kernel_source(ns["k"])
    assert source.endswith("\n\n@cuda.jit\ndef k(out):\n    out[0] = MAX   \n")
    ns = run_cells("MAX = 3\n\n@cuda.jit\ndef k(out):\n    out[0] = MAX\n")
    assert kernel_source(ns["k"])[0].endswith("\n\n@cuda.jit\ndef k(out):\n    out[0] = MAX\n")
