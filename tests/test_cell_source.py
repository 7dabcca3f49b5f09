"""Kernel source read from a submitted cell's text, without running it (the audit's path)."""
import pytest

import puzzles
from graders.cell_source import kernel_source_from_cell
from graders.kernel_source import KernelSourceError
from graders.puzzle_grade import run_source
from puzzle_cells import REFERENCE, SOLUTIONS
from workshop.cells import read_cells, strip_solution_markers


@pytest.mark.parametrize("puzzle", [puzzles.get("conv1d"), puzzles.get("matmul")], ids=lambda p: p.id)
def test_reference_cell_parses_to_a_kernel_that_passes(puzzle):
    source = kernel_source_from_cell(strip_solution_markers(REFERENCE[puzzle.id]), puzzle.kernel_name)
    run = run_source(puzzle.id, source, puzzle.kernel_name, "hidden", "sim")
    assert run.correct and not run.violations


def test_patching_statements_are_left_out():
    (_, cell), = read_cells(SOLUTIONS / "tampering" / "patch_grader.py").items()
    source = kernel_source_from_cell(cell, "zip_kernel")
    assert "_grading" not in source and "def zip_kernel" in source
    assert not run_source("zip", source, "zip_kernel", "hidden", "sim").correct


def test_unparseable_or_missing_kernel_is_reported():
    with pytest.raises(KernelSourceError, match="does not parse: line 1"):
        kernel_source_from_cell("def (:", "map_kernel")
    with pytest.raises(KernelSourceError, match="no @cuda.jit function named map_kernel"):
        kernel_source_from_cell("def map_kernel(out, a, size):\n    pass\n", "map_kernel")
