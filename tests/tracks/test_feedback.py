"""Feedback with the numbers: the timing table under each timed kernel's cell and the ladder's chart, from the
results the trusted grader stored, through nbconvert's HTML export as ``nbgrader generate_feedback`` runs it; and
the page's summary, naming each graded cell."""
from __future__ import annotations

import logging

import nbformat
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_notebook
from timed_results import SPEC, graded_cell, timed

from gradebook.feedback import PerformanceFeedback, cell_names
from graders import tracks
from graders.autograde import RESULTS_KEY, graded_cells
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
    curve = SPEC.kernel("padded")
    assert f"0.846 (no speed points at {curve.floor:g}, full at {curve.target:g})" in padded
    assert "4,814 GB/s" in padded
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


def menu_result(kernel_id: str, precision: str, tflops: float, baseline: str, base_tflops: float,
                errors: list[float], probe_tflops: float | None = None) -> dict:
    """A tensor-core kernel's result as the CUDA engine records it at 4096^3: its format, timing (with the mma.sync
    probe's rate where given) and the errors of its correct checks (``max_rel_error``, the relative Frobenius
    error a tenth of it)."""
    flop = 2 * 4096 ** 3
    timing = {"shape": [4096] * 3, "work_unit": "FLOP", "ratio": tflops / base_tflops, "verified_launches": 30,
              "kernel": {"median_s": flop / (tflops * 1e12), "throughput": tflops * 1e12, "samples": 30},
              "baseline": {"name": baseline, "median_s": flop / (base_tflops * 1e12), "throughput": base_tflops * 1e12,
                           "samples": 30}, "ceiling": {}}
    if probe_tflops:
        timing["instruction_ceiling"] = {"name": f"mma.sync {kernel_id}", "throughput": probe_tflops * 1e12}
    checks = [{"shape": [64, 64, 32], "ok": True, "accuracy": {"max_rel_error": e, "frobenius_rel_error": e / 10,
                                                               "element_bound_used": 0.01}} for e in errors]
    return GradeResult(kernel_id, Status.OK, target="gpu", details={
        "timing": timing, "checks": checks, "precision": precision, "curve": {"floor": 0.1, "target": 0.5},
        "environment": {"gpu": "NVIDIA H200"}}).as_dict()


def test_the_precision_menu_gets_a_table_of_format_time_throughput_and_error():
    """Made-up numbers: each kernel's row, its error the largest over its checks."""
    nb = new_notebook(cells=[
        graded_cell("warptiling_score", [menu_result("warptiling", "bf16 in, fp32 accumulate", 300.0,
                                                     "cuBLAS bf16 GEMM", 600.0, [2e-7, 3e-7], 640.0)]),
        graded_cell("tf32_score", [menu_result("tf32", "TF32 (fp32 in, rounded), fp32 accumulate", 150.0,
                                               "cuBLAS TF32 GEMM", 300.0, [4e-4])]),
        graded_cell("fp8_score", [menu_result("fp8", "fp8 e4m3 in, fp32 accumulate", 250.0, "cuBLAS fp8 GEMM",
                                              1000.0, [1e-8, 5e-8, 2e-8])])])
    nb, body = feedback(nb)
    last = [o["data"]["text/html"] for o in nb.cells[-1].outputs if "text/html" in o.get("data", {})]
    assert len(last) == 2 and "workshop-precision" in last[1] and body.count("workshop-precision") == 1
    rows = last[1].split("<tr>")[2:]
    assert [r.split("</td>")[0].removeprefix("<td style='text-align:left'>") for r in rows] == \
        ["warptiling", "tf32", "fp8"]
    assert "fp8 e4m3 in, fp32 accumulate" in rows[2] and "250.0 TFLOP/s" in rows[2]
    assert "cuBLAS fp8 GEMM: 1,000.0 TFLOP/s" in rows[2] and "0.250" in rows[2]
    assert ">5e-08<" in rows[2] and ">5e-09<" in rows[2]                 # the largest of its three checks
    assert ">3e-07<" in rows[0] and ">0.0004<" in rows[1]
    assert ">46.9%<" in rows[0] and ">?<" in rows[1]                       # 300 of the probe's 640 TFLOP/s; none
    warptiling = [o["data"]["text/html"] for o in nb.cells[0].outputs if "text/html" in o.get("data", {})][0]
    assert ("instruction ceiling</th><td style='text-align:left'>mma.sync warptiling, measured beside your kernel: "
            "640,000 GFLOP/s; yours at 46.9% of it (not scored)") in warptiling
    assert "0.5498 ms" in rows[2]                                        # 2 * 4096^3 FLOP at 250 TFLOP/s


def test_a_timed_kernel_without_a_format_gets_no_precision_table():
    nb = new_notebook(cells=[graded_cell("naive_score", [timed("naive", 0.131)]),
                             graded_cell("padded_score", [timed("padded", 0.846)])])
    nb, body = feedback(nb)
    assert "workshop-precision" not in body


def test_the_html_exporters_settings_are_recognized(caplog):
    """nbgrader's HTML export configures every preprocessor's ``display_data_priority``: no "Config option ...
    not recognized by PerformanceFeedback" on each ``nbgrader generate_feedback``; on by default, as listed."""
    config = HTMLExporter().default_config
    with caplog.at_level(logging.WARNING):
        preprocessor = PerformanceFeedback(config=config)
    assert preprocessor.enabled and not caplog.records
    assert preprocessor.display_data_priority == config.NbConvertBase.display_data_priority


def test_the_summary_names_each_graded_cell_by_its_heading_and_what_it_grades():
    """nbgrader's summary says "Test cell" for each; the feedback's names the puzzle or step (a heading's first
    sentence) and what the cell grades, for every graded cell of every track."""
    for track in tracks.all_tracks():
        nb = nbformat.read(str(track.notebook_path), as_version=4)
        names = cell_names(nb)
        assert set(names) == {c.metadata.nbgrader.grade_id for c in graded_cells(nb)}, track.name
    puzzles = cell_names(nbformat.read(str(tracks.get("puzzles").notebook_path), as_version=4))
    assert puzzles["guard_correct"] == "Puzzle 3: Guards — correct on fresh inputs and more sizes"
    assert puzzles["guard_limits"] == "Puzzle 3: Guards — within the access limits"
    tensorcores = cell_names(nbformat.read(str(tracks.get("tensorcores").notebook_path), as_version=4))
    assert tensorcores["mma_score"] == "3. Mma.sync and ldmatrix — correctness and speed, on the GPU worker"
    assert tensorcores["warptiling_sass"] == ("6. Warp tiling, and a main loop with nothing in it but the work — "
                                              "structure")   # its heading is a paragraph: its first sentence

