"""Feedback with the numbers: the timing table under each timed kernel's cell and the ladder's chart, from the
results the trusted grader stored, through nbconvert's HTML export as ``nbgrader generate_feedback`` runs it."""
from __future__ import annotations

import nbformat
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_notebook
from timed_results import graded_cell, timed

from gradebook.feedback import PerformanceFeedback
from graders.autograde import RESULTS_KEY
from graders.result import GradeResult, Status


def feedback(nb) -> tuple[nbformat.NotebookNode, str]:
    """The notebook after `PerformanceFeedback`, and its HTML (nbconvert's exporter, as nbgrader uses it)."""
    nb, _ = PerformanceFeedback().preprocess(nb, {})
    body, _ = HTMLExporter().from_notebook_node(nb)
    return nb, body


def test_each_timed_kernel_gets_its_numbers_and_the_ladder_a_chart():
    nb = new_notebook(cells=[graded_cell("naive_score", [timed("naive", 0.131)]),
                             graded_cell("padded_score", [timed("padded", 0.846)]),
                             graded_cell("best_score", [timed("best", 0.62, Status.IMPLAUSIBLE)])])
    nb, body = feedback(nb)
    tables = [o for c in nb.cells for o in c.outputs if "text/html" in o.get("data", {})]
    assert len(tables) == 3
    padded = tables[1]["data"]["text/html"]
    assert "0.1513 ms" in padded and "3,545 GB/s" in padded and "ratio" in padded and "NVIDIA H200" in padded
    assert "0.846 (no speed points at 0.5, full at 0.8)" in padded and "4,814 GB/s" in padded
    charts = [o for o in nb.cells[-1].outputs if "image/png" in o.get("data", {})]
    assert len(charts) == 1 and body.count('src="data:image/png;base64,') == 1
    assert body.count("workshop-timing") == 3 and "3,545 GB/s" in body
    assert "implausible" in tables[2]["data"]["text/html"]


def test_a_notebook_without_timed_kernels_is_left_as_it_was():
    puzzle = GradeResult("map", Status.OK, target="sim").as_dict()
    nb = new_notebook(cells=[graded_cell("map_correct", [puzzle]), new_code_cell("print(1)")])
    before = nbformat.writes(nb)
    nb, body = feedback(nb)
    assert nbformat.writes(nb) == before and 'src="data:image/png' not in body


def test_results_outside_graded_cells_are_ignored():
    """A student's own cell with forged results in its metadata gets no table."""
    forged = new_code_cell("x = 1")
    forged.metadata[RESULTS_KEY] = {"results": [timed("padded", 9.9)]}
    nb, body = feedback(new_notebook(cells=[forged]))
    assert nb.cells[0].get("outputs") == [] and "9.9" not in body
