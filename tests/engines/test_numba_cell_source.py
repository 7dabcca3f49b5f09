"""Kernel source read from a submitted cell's text, without running it (the audit's path)."""
import pytest

from graders.numba_engine import catalogue
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.kernel_source import KernelSourceError
from graders.numba_engine.grade import run_source
from puzzle_cells import REFERENCE, SOLUTIONS
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
