"""Kernel source read from a submitted cell's text, without running it (the audit's path)."""
import pytest
from puzzle_cells import REFERENCE, SOLUTIONS

from graders.numba_engine import catalogue
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.grade import run_source
from graders.numba_engine.kernel_source import KernelSourceError
from workshop.cells import read_cells, strip_solution_markers


@pytest.mark.parametrize("puzzle", [catalogue.get("conv1d"), catalogue.get("matmul")], ids=lambda p: p.id)
def test_reference_cell_parses_to_a_kernel_that_passes(puzzle):
    source = kernel_source_from_cell(strip_solution_markers(REFERENCE[puzzle.id]), puzzle.kernel_name)
    run = run_source(puzzle.id, source, puzzle.kernel_name, "hidden", "sim")
    assert run.ok, run.failure_line()


def test_patching_statements_are_left_out():
    (_, cell), = read_cells(SOLUTIONS / "tampering" / "patch_grader.py").items()
    source = kernel_source_from_cell(cell, "zip_kernel")
    assert "_grading" not in source and "def zip_kernel" in source
    assert run_source("zip", source, "zip_kernel", "hidden", "sim").status == "incorrect"


def test_unparseable_or_missing_kernel_is_reported():
    with pytest.raises(KernelSourceError, match="does not parse: line 1"):
        kernel_source_from_cell("def (:", "map_kernel")
    with pytest.raises(KernelSourceError, match="no @cuda.jit function named map_kernel"):
        kernel_source_from_cell("def map_kernel(out, a, size):\n    pass\n", "map_kernel")


def test_kept_code_is_checked_against_the_kernel_subset_with_the_cells_line_numbers():
    cell = "import os\nTPB = 8\n\n@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n" \
           "    out[i] = a[i] + TPB\n    os.system('touch x')\n"
    with pytest.raises(KernelSourceError, match=r"^line 8: os\.system is not available in a CUDA kernel"):
        kernel_source_from_cell(cell, "map_kernel")


def test_number_constants_booleans_and_math_constants_are_kept_calls_are_not():
    cell = ("import math\nTPB = 8\nDEBUG = False\nSCALE = 2 * math.pi\nSIZE = len('abc')\n"
            "HALF: int = TPB // 2\n\n@cuda.jit\ndef k(out, a, size):\n"
            "    out[0] = TPB + SCALE + HALF if not DEBUG else 0\n")
    source = kernel_source_from_cell(cell, "k")
    for line in ("TPB = 8", "DEBUG = False", "SCALE = 2 * math.pi", "HALF: int = TPB // 2"):
        assert line in source
    assert "len(" not in source


@pytest.mark.parametrize("statement, name", [("import os.path", "os"), ("import os.path as p", "p"),
                                             ("import xml.dom.minidom", "xml")])
def test_a_dotted_import_left_out_binds_its_first_name_or_its_alias(statement, name):
    """``import os.path`` binds ``os``: a kernel that uses it is told what the grader keeps."""
    cell = f"{statement}\n\n@cuda.jit\ndef k(out):\n    out[0] = {name}.sep\n"
    with pytest.raises(KernelSourceError) as raised:
        kernel_source_from_cell(cell, "k")
    assert str(raised.value) == (f"line 5: {name}.sep is not available in a CUDA kernel (the grader keeps only "
                                 "numbers, @cuda.jit functions and numba, math and numpy imports from the cell)")


def test_arithmetic_is_a_constant_only_when_both_sides_are():
    cell = ("TPB = 8\nSIZE = 2 * len('abc')\nEDGE = TPB - int('3')\nLEFT = sum([1]) + TPB\nBOTH = TPB * 2\n\n"
            "@cuda.jit\ndef k(out):\n    out[0] = TPB\n")
    source = kernel_source_from_cell(cell, "k")
    assert "TPB = 8\n\nBOTH = TPB * 2\n\n@cuda.jit" in source
    assert all(name not in source for name in ("SIZE", "EDGE", "LEFT", "len(", "int(", "sum("))


def test_a_relative_import_is_left_out_or_refused_with_its_line():
    cell = "from . import helpers\n\n@cuda.jit\ndef k(out):\n    out[0] = 1\n"
    assert "helpers" not in kernel_source_from_cell(cell, "k")
    with pytest.raises(KernelSourceError) as raised:
        kernel_source_from_cell("from .numba import cuda\n\n@cuda.jit\ndef k(out):\n    out[0] = 1\n", "k")
    assert str(raised.value) == "line 1: from .numba import cuda is not available in a CUDA kernel"


@pytest.mark.parametrize("cell, message", [
    ("def (:", "the cell does not parse: line 1: invalid syntax"),
    ("TPB = 8\n\n@cuda.jit\ndef k(out):\n    out[0] = (\n", "the cell does not parse: line 5: '(' was never closed"),
    ("x = 1\0", "the cell does not parse: source code string cannot contain null bytes"),
])
def test_a_cell_that_does_not_parse_is_named_the_cell_with_its_line(cell, message):
    with pytest.raises(KernelSourceError) as raised:
        kernel_source_from_cell(cell, "k")
    assert str(raised.value) == message


def test_every_statement_left_out_is_remembered_not_only_the_last():
    cell = "import os\nhelper = len\nTPB = 8\n\n@cuda.jit\ndef k(out):\n    out[0] = os.sep\n"
    with pytest.raises(KernelSourceError) as raised:
        kernel_source_from_cell(cell, "k")
    assert str(raised.value) == ("line 7: os.sep is not available in a CUDA kernel (the grader keeps only numbers, "
                                 "@cuda.jit functions and numba, math and numpy imports from the cell)")
