"""Sending a notebook kernel to the grader as self-contained source."""
import pytest

from graders.kernel_source import KernelSourceError, kernel_source
from puzzle_cells import run_cells

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
