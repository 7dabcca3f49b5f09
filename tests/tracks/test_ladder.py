"""The abstraction ladder's worklog without a GPU: lines of code as the graders count them, each rung's reference
counted, and the feedback's table and chart from a synthetic ladder record beside a student's timed CUTLASS kernel
(`graders.ladder`, `gradebook.feedback.PerformanceFeedback`)."""
from __future__ import annotations

import json

import pytest
from nbformat.v4 import new_notebook
from timed_results import graded_cell

from gradebook.feedback import PerformanceFeedback
from graders import ladder, settings
from graders.cuda_engine.spec import load_spec
from graders.result import GradeResult, Status

FLOP = 2 * 4096 ** 3


def test_lines_of_code_skip_blank_lines_comments_and_docstrings():
    cpp = "// a comment\n\n#include <cute/tensor.hpp>\n/* a block\n   still */\nint x; // trailing\n  /* one */\n"
    assert ladder.lines_of_code(cpp, "//") == 2
    python = '@triton.jit\ndef k(x):\n    """What it does,\n    on two lines."""\n    # a comment\n\n    return x\n'
    assert ladder.lines_of_code(python, "#") == 3
    assert ladder.lines_of_code("def broken(:\n    pass\n", "#") == 2   # a cell that does not parse still counts


def test_every_rung_is_a_kernel_of_its_track():
    from graders.tilelang_engine.spec import load_tilelang_spec
    from graders.triton_engine.spec import load_triton_spec
    specs = {"tensorcores": load_spec("tensorcores"), "cutlass": load_spec("cutlass"),
             "triton": load_triton_spec("triton").assignment, "tilelang": load_tilelang_spec("tilelang")}
    for rung in ladder.RUNGS:
        assert specs[rung.track].kernel(rung.kernel).reference.is_file(), rung
    assert ladder.rung_of("cutlass", "ws").name == "CUTLASS" and ladder.rung_of("cutlass", "fp16") is None


def cutlass_result(tflops: float, lines: int) -> dict:
    """The CUTLASS rung's result (its warp-specialised fp16 kernel) as the CUDA engine records it at 4096^3 beside
    cuBLAS at 700 TFLOP/s."""
    timing = {"shape": [4096] * 3, "work_unit": "FLOP", "ratio": tflops / 700.0, "verified_launches": 30,
              "kernel": {"median_s": FLOP / (tflops * 1e12), "throughput": tflops * 1e12, "samples": 30},
              "baseline": {"name": "cuBLAS fp16 GEMM (torch.mm, fp32 out)", "median_s": FLOP / 700e12,
                           "throughput": 700e12, "samples": 30}, "ceiling": {}}
    return GradeResult("ws", Status.OK, target="gpu", details={
        "timing": timing, "curve": {"floor": 0.3, "target": 0.8}, "lines_of_code": lines,
        "environment": {"gpu": "NVIDIA H200"}}).as_dict()


@pytest.fixture
def record(tmp_path, monkeypatch) -> dict:
    """A synthetic ladder record in a results folder of its own, older and newer files beside it."""
    monkeypatch.setattr(settings, "RESULTS", tmp_path)
    folder = tmp_path / ladder.RECORD_FOLDER
    folder.mkdir()
    rungs = {"CUDA C++": {"lines_of_code": 127, "tflops": 250.0, "cublas_tflops": 700.0, "share_of_cublas": 0.357},
             "Triton": {"lines_of_code": 37, "tflops": 600.0, "cublas_tflops": 700.0, "share_of_cublas": 0.857},
             "CUTLASS": {"lines_of_code": 70, "tflops": 560.0, "cublas_tflops": 700.0, "share_of_cublas": 0.8},
             "TileLang": {"lines_of_code": 16, "tflops": 630.0, "cublas_tflops": 700.0, "share_of_cublas": 0.9}}
    found = {"gpu": "NVIDIA H200", "date": "2026-12-06T01:00:00+00:00", "rungs": rungs}
    (folder / f"{ladder.RECORD_PREFIX}-20261201-000000.json").write_text(json.dumps({"rungs": {}}))
    (folder / f"{ladder.RECORD_PREFIX}-20261206-010000.json").write_text(json.dumps(found))
    return found


def test_the_rows_put_the_students_kernel_in_its_rungs_place(record):
    assert ladder.latest_record() == record
    rows = ladder.rows(ladder.rung_of("cutlass", "ws"), cutlass_result(420.0, 55), record)
    assert list(rows) == ["CUDA C++: reference", "Triton: reference", "CUTLASS: your kernel", "TileLang: reference"]
    yours = rows["CUTLASS: your kernel"]
    assert yours["lines_of_code"] == 55 and yours["tflops"] == pytest.approx(420.0)
    assert yours["share_of_cublas"] == pytest.approx(0.6) and yours["shape"] == [4096] * 3
    assert rows["TileLang: reference"]["lines_of_code"] == 16


def test_without_a_record_the_other_rungs_are_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "RESULTS", tmp_path)
    assert ladder.latest_record() is None
    rows = ladder.rows(ladder.rung_of("cutlass", "ws"), cutlass_result(420.0, 55), None)
    table = ladder.table_html(rows, None)
    assert "not measured on a GPU yet" in table and table.count(">?<") == 12
    assert ladder.chart_png(rows).startswith(b"\x89PNG")


def test_the_feedback_of_a_cutlass_notebook_has_the_ladders_table_and_chart(record):
    nb = new_notebook(cells=[graded_cell("bf16_score", [cutlass_result(500.0, 60) | {"test": "bf16"}]),
                             graded_cell("ws_score", [cutlass_result(420.0, 55)])])
    nb, _ = PerformanceFeedback().preprocess(nb, {"nbgrader": {"assignment": "cutlass"}})
    outputs = nb.cells[-1].outputs
    tables = [o["data"]["text/html"] for o in outputs if "workshop-ladder" in o.get("data", {}).get("text/html", "")]
    assert len(tables) == 1
    rows = tables[0].split("<tr>")[2:]
    assert rows[2].startswith("<td style='text-align:left'>CUTLASS: your kernel</td>")
    assert ">55<" in rows[2] and ">420.0<" in rows[2] and ">60.0%<" in rows[2]
    assert ">16<" in rows[3] and ">90.0%<" in rows[3] and "NVIDIA H200 (2026-12-06)" in tables[0]
    charts = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(charts) == 2   # the notebook's ratio chart, and the ladder's


def test_other_notebooks_get_no_ladder(record):
    nb = new_notebook(cells=[graded_cell("ws_score", [cutlass_result(420.0, 55)])])
    nb, _ = PerformanceFeedback().preprocess(nb, {"nbgrader": {"assignment": "tensorcores_copy"}})
    assert not any("workshop-ladder" in o.get("data", {}).get("text/html", "") for o in nb.cells[-1].outputs)
