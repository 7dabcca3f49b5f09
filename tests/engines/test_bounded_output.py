"""Every byte and every configuration from student code into the grader's process is bounded: a grading child's
stdout, stderr and answer (graders/sandbox/capped_output.py), a search space before it is expanded
(graders/cuda_engine/structure.py), the submitted notebook before it is parsed (graders/submission.py), and the
notebook's outputs while it runs and the hidden tests' texts (graders/autograde.py). Each cap says which it is."""
from __future__ import annotations

import shutil
import re
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from traitlets.config import Config

from graders import autograde, submission
from graders.cuda_engine import structure
from graders.sandbox import capped_output
from graders.sandbox.run import run_child

MIB = 1 << 20

FLOOD_HANDLER = textwrap.dedent('''
    import os
    def handle(request):
        block = b"x" * (1 << 20)
        while request["forever"] or request["mib"]:
            for fd in request["fds"]:
                os.write(fd, block)
            request["mib"] -= 1
        return {"big": "y" * request["answer"]}
''')


@pytest.fixture
def flood(tmp_path, monkeypatch):
    (tmp_path / "flood_handler.py").write_text(FLOOD_HANDLER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sys.path.insert(0, str(tmp_path))
    yield "flood_handler"
    sys.path.remove(str(tmp_path))


def _traced(call):
    """(what ``call()`` returns, the peak of this process's Python allocations while it ran)."""
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- a grading child's output -------------------------------------------------------------------------

def test_a_child_flooding_stdout_and_stderr_leaves_the_parent_bounded_and_says_what_was_dropped(flood):
    request = {"forever": False, "mib": 256, "fds": [1, 2], "answer": 10}
    result, peak = _traced(lambda: run_child(flood, request, timeout_s=60))
    assert result.ok and result.answer == {"big": "y" * 10}
    assert peak < 4 * MIB, f"the parent's allocations peaked at {peak / MIB:.1f} MiB for 512 MiB of output"
    for text, name in ((result.stdout, "stdout"), (result.stderr, "stderr")):
        note, kept = text.split("\n", 1)
        assert note == (f"[{256 * MIB - capped_output.TAIL_BYTES} bytes dropped: the grader keeps the last "
                        f"{capped_output.TAIL_BYTES} bytes of a grading child's {name}]")
        assert kept == "x" * capped_output.TAIL_BYTES


def test_an_answer_over_the_cap_is_a_crash_that_names_the_cap(flood):
    request = {"forever": False, "mib": 0, "fds": [], "answer": capped_output.ANSWER_BYTES}   # with its JSON: more
    result, peak = _traced(lambda: run_child(flood, request, timeout_s=60))
    assert result.status == "crashed"
    assert result.message == (f"the answer was larger than {capped_output.ANSWER_BYTES} bytes (the cap on a "
                              "grading child's answer)")
    assert peak < capped_output.ANSWER_BYTES + 2 * MIB
    request["answer"] = capped_output.ANSWER_BYTES - 20   # {"big": "..."} is 11 bytes more: within the cap
    assert run_child(flood, request, timeout_s=60).ok


def test_a_child_that_floods_until_its_deadline_is_killed_at_it(flood):
    start = time.monotonic()
    result = run_child(flood, {"forever": True, "mib": 0, "fds": [1], "answer": 0}, timeout_s=2)
    assert result.status == "timeout" and "stopped after 2 s" in result.message
    assert time.monotonic() - start < 2 + capped_output.GRACE_S


def test_a_tail_keeps_the_end_and_counts_the_rest():
    tail = capped_output.Tail(cap=8)
    for chunk in (b"0123", b"456789abcdef", b"", b"gh"):
        tail.feed(chunk)
    assert (tail.data, tail.total, tail.dropped) == (b"abcdefgh", 18, 10)
    assert tail.text("stdout") == ("[10 bytes dropped: the grader keeps the last 8 bytes of a grading child's stdout]\n"
                                   "abcdefgh")
    short = capped_output.Tail(cap=8)
    short.feed(b"ok\n")
    assert short.text("stderr") == "ok\n"


def test_capped_text_keeps_the_start_and_counts_what_was_dropped():
    text = capped_output.CappedText(10)
    for part in ("0123456", "789abc", "def"):
        print(part, end="", file=text)
    assert (text.kept(), text.dropped) == ("0123456789", 6)
    assert capped_output.shorten("abcdef", 6, "x") == "abcdef"
    assert capped_output.shorten("abcdefg", 6, "an error") == (
        "abcdef [1 more characters dropped: an error is capped at 6]")


# --- search spaces ------------------------------------------------------------------------------------

RULES = structure.load_structure("gemm").autotune


def test_a_huge_search_space_is_refused_from_its_lengths_without_being_expanded(monkeypatch):
    monkeypatch.setattr(structure, "inspect_launches", lambda *a, **k: pytest.fail("nothing may be compiled"))
    space = {key: list(range(4, 404, 4)) for key in structure.TUNABLE}   # 100 a key: 10^10 configurations
    start = time.monotonic()
    (problems, valid), peak = _traced(lambda: structure.search_problems("gemm", "src", space, {}))
    assert time.monotonic() - start < 1 and peak < MIB
    assert valid == [] and problems == [
        f"the search space lists {100 ** 5} configurations (100 x 100 x 100 x 100 x 100 values of BM, BN, BK, TM, "
        f"TN); the grader expands at most {structure.MAX_SPACE}"]


def test_a_search_space_is_expanded_up_to_its_cap_exactly():
    space = {"BM": [128] * 16, "BN": [128] * 16, "BK": [8] * 16, "TM": [8], "TN": [8]}
    assert 16 ** 3 == structure.MAX_SPACE and len(structure.expand_space(space)) == structure.MAX_SPACE
    space["TN"] = [8, 4]
    with pytest.raises(ValueError, match=f"lists {2 * structure.MAX_SPACE} configurations .*at most "
                                         f"{structure.MAX_SPACE}"):
        structure.expand_space(space)


def test_autotune_refuses_a_space_of_more_valid_configurations_than_the_rules_allow_before_grading_any(monkeypatch):
    import graders.cuda_engine.grade as grade
    monkeypatch.setattr(grade, "grade_kernel", lambda *a, **k: pytest.fail("nothing may be graded"))
    tm_tn = [4, 8, 16, 32]
    space = {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16, 32], "TM": tm_tn, "TN": tm_tn}
    valid = sum(not structure.config_problem(c, RULES) for c in structure.expand_space(space))
    assert valid > RULES.max_configs
    with pytest.raises(ValueError) as refused:
        structure.autotune("gemm", "src", space)
    assert str(refused.value) == (f"the search space has {valid} valid configurations; at most {RULES.max_configs} "
                                  "(the autotuning rules' max_configs)")


# --- the submission, before and while it is read ------------------------------------------------------

def test_the_notebook_file_is_refused_past_each_cap_before_it_is_parsed():
    assert submission.file_problem(b" " * submission.MAX_NOTEBOOK_BYTES) == ""
    assert submission.file_problem(b" " * (submission.MAX_NOTEBOOK_BYTES + 1)).startswith(
        f"the notebook file is larger than {submission.MAX_NOTEBOOK_BYTES} bytes (the cap on a submitted notebook's "
        "size): clear the notebook's outputs")
    lists = submission.MAX_JSON_CONTAINERS   # [[], [], ...]: that many arrays
    assert submission.file_problem(b"[" + b"[]," * (lists - 2) + b"[]]") == ""
    assert submission.file_problem(b"[" + b"[]," * (lists - 1) + b"[]]").startswith(
        f"the notebook file holds {lists + 1} JSON objects and arrays; a submitted notebook may hold at most {lists}")
    values = submission.MAX_JSON_VALUES      # [0, 0, ...]: one array, that many values less one
    assert submission.file_problem(b"[" + b"0," * (values - 2) + b"0]") == ""
    assert submission.file_problem(b"[" + b"0," * (values - 1) + b"0]").startswith(
        f"the notebook file holds about {values + 1} JSON values; a submitted notebook may hold at most {values}")
    inside_strings = b'["' + b'[{,\\"' * lists + b'", "\\\\"]'
    assert submission.file_problem(inside_strings) == ""


def test_counting_the_json_takes_linear_time_even_on_unterminated_strings():
    start = time.monotonic()
    for data in (b'"\\' * (submission.MAX_NOTEBOOK_BYTES // 2), b'"a' * (submission.MAX_NOTEBOOK_BYTES // 2)):
        assert submission.file_problem(data) == ""
    assert time.monotonic() - start < 5


def test_a_notebook_is_refused_past_its_cell_count_and_a_cell_past_its_length():
    nb = new_notebook(cells=[new_markdown_cell("x") for _ in range(submission.MAX_CELLS)])
    assert submission.notebook_problem(nb) == ""
    nb.cells.append(new_markdown_cell("x"))
    assert submission.notebook_problem(nb) == (f"the notebook has {submission.MAX_CELLS + 1} cells; a submitted "
                                               f"notebook may have at most {submission.MAX_CELLS}")
    nb = _solution_notebook(("a" * submission.MAX_SOURCE_CHARS, "map"))
    assert submission.notebook_problem(nb) == ""
    nb.cells[0].source += "a"
    assert submission.notebook_problem(nb) == (f"cell 1 (map) of the notebook holds {submission.MAX_SOURCE_CHARS + 1} "
                                               f"characters; a cell may hold at most {submission.MAX_SOURCE_CHARS}")


def _solution_notebook(*cells: tuple[str, str]):
    nb = new_notebook()
    for source, grade_id in cells:
        cell = new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True, "grade": False, "locked": False,
                                     "schema_version": 3}
        nb.cells.append(cell)
    return nb


def test_a_literal_is_read_up_to_its_cap_once_and_each_caller_gets_a_copy():
    within = "[" + ",".join(["0"] * (submission.MAX_LITERAL_NODES - 2)) + "]"   # the list's Load context is a node
    over = "[" + ",".join(["0"] * (submission.MAX_LITERAL_NODES - 1)) + "]"
    nested = "[" * 150 + "]" * 150
    read = submission.Submission(_solution_notebook((f"a = {within}\nb = {over}\nc = {nested}", "cell")))
    first = read.value("a")
    assert first == [0] * (submission.MAX_LITERAL_NODES - 2)
    first.append(1)
    assert read.value("a") == [0] * (submission.MAX_LITERAL_NODES - 2)
    with pytest.raises(submission.SubmissionError) as refused:
        read.value("b")
    assert str(refused.value) == (f"b is a literal of {submission.MAX_LITERAL_NODES + 1} parts (values, keys and "
                                  f"containers); the grader reads at most {submission.MAX_LITERAL_NODES}")
    assert len(str(read.value("c"))) == 300


def test_a_cell_at_its_length_cap_is_read_with_bounded_memory():
    big = "x = [" + ",".join(["0"] * ((submission.MAX_SOURCE_CHARS - 8) // 2)) + "]"
    assert len(big) <= submission.MAX_SOURCE_CHARS
    deep = "y = " + "[" * 1000 + "]" * 1000
    read, peak = _traced(lambda: submission.Submission(_solution_notebook((big, "big"), (deep, "deep"))))
    assert peak < 64 * MIB, f"{peak / MIB:.0f} MiB to parse one cell of {len(big)} characters"
    with pytest.raises(submission.SubmissionError, match="literal of .* parts"):
        read.value("x")
    with pytest.raises(submission.SubmissionError, match="do not parse: deep"):
        read.value("y")


def test_a_numba_kernel_is_read_up_to_its_length_cap():
    def kernel(comment: int) -> str:
        return (f"from numba import cuda\n\n@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n"
                f"    #{'#' * comment}\n    out[i] = a[i] + 10\n")

    def read(source: str):
        return submission.Submission(_solution_notebook((source, "map"))).value("map_kernel")

    fits = submission.MAX_KERNEL_CHARS - len(read(kernel(0)).source)
    assert len(read(kernel(fits)).source) == submission.MAX_KERNEL_CHARS
    with pytest.raises(submission.SubmissionError) as refused:
        read(kernel(fits + 1))
    assert str(refused.value) == (f"the source of map_kernel (its cell's @cuda.jit functions, imports and constants) "
                                  f"holds {submission.MAX_KERNEL_CHARS + 1} characters; the grader reads at most "
                                  f"{submission.MAX_KERNEL_CHARS}")


@pytest.fixture
def exporter(released, tmp_path):
    """The exporter nbgrader's autograde uses, and the ids it gives one submission of the released puzzles."""
    shutil.copy(released["puzzles"] / "gradebook.db", tmp_path / "gradebook.db")
    ids = {"student": "eve", "assignment": "puzzles", "notebook": "puzzles",
           "db_url": f"sqlite:///{tmp_path / 'gradebook.db'}"}
    config = Config()
    config.CourseDirectory.course_id = "kernel-workshop"
    return autograde.BoundedNotebookExporter(config=config), ids


def _export(exporter, ids: dict, path: Path):
    nb, resources = exporter.from_filename(str(path), resources={"nbgrader": dict(ids)})
    return nbformat.reads(nb, as_version=4), resources


def test_a_submission_over_a_cap_is_not_parsed_and_the_release_stands_in_for_it(exporter, released, tmp_path):
    exporter, ids = exporter
    release = nbformat.read(str(released["puzzles"] / "release" / "puzzles" / "puzzles.ipynb"), as_version=4)
    huge = tmp_path / "huge.ipynb"
    huge.write_bytes(b'{"cells": [' + b" " * submission.MAX_NOTEBOOK_BYTES + b"]}")
    stand_in, resources = _export(exporter, ids, huge)                  # nbgrader's first pass
    assert resources[autograde.REFUSED].startswith("the notebook file is larger than")
    released_cells = {c.metadata.nbgrader["grade_id"]: c for c in release.cells if "nbgrader" in c.metadata}
    assert [c.metadata.nbgrader["grade_id"] for c in stand_in.cells] == list(released_cells)
    for cell in stand_in.cells:
        assert cell.source == released_cells[cell.metadata.nbgrader["grade_id"]].source
    written = tmp_path / "written.ipynb"
    nbformat.write(stand_in, str(written))
    assert _export(exporter, ids, written)[1][autograde.REFUSED] == resources[autograde.REFUSED]   # its second pass
    assert autograde.REFUSED not in _export(exporter, ids, written)[1]  # a new submission's first pass


def test_a_refused_submission_scores_zero_in_every_graded_cell_with_the_cap():
    cells = [new_code_cell(f"grade_correctness('{p}', k)", metadata={"nbgrader": {"grade_id": f"{p}_correct"}})
             for p in ("map", "zip")]
    grading = autograde._Grading(cells, submission.Submission(new_notebook()), 2, _Log(), time_limit=60,
                                 refused="the notebook has 1001 cells; a submitted notebook may have at most 1000")
    grading.finish()
    for grade_id in ("map_correct", "zip_correct"):
        error = grading.outputs[grade_id][-1]
        assert (error.output_type, error.ename) == ("error", "SubmissionError")
        assert error.evalue == "the notebook has 1001 cells; a submitted notebook may have at most 1000"


class _Log:
    """nbgrader's logger as the grading uses it: (level, line) for each line."""

    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        return lambda text, *args: self.lines.append((level, text % args))


def test_a_hidden_tests_report_and_error_are_capped_and_its_wait_is_bounded(monkeypatch):
    def loud():
        print("r" * (autograde.MAX_REPORT_CHARS + 10))
        raise ValueError("e" * (autograde.MAX_ERROR_CHARS + 10))

    release = threading.Event()
    monkeypatch.setattr(sys, "stdout", sys.stdout)   # a grading past its time limit leaves its wrapper there
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "loud", loud)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "stuck", lambda: release.wait(30))
    cells = [new_code_cell(f"{name}()", metadata={"nbgrader": {"grade_id": name}}) for name in ("loud", "stuck")]
    log = _Log()
    start = time.monotonic()
    grading = autograde._Grading(cells, submission.Submission(new_notebook()), 2, log, time_limit=2)
    grading.finish()
    release.set()
    assert 2 <= time.monotonic() - start < 5
    report, error = grading.outputs["loud"]
    # 11 characters past the cap when printed (10 and the newline), and the wrapped lines past it once the long
    # line is wrapped for the page (its continuations indented): one note counts both
    dropped = re.fullmatch(r"(?s).*\n\[(\d+) more characters dropped: what a hidden test prints is capped at "
                           rf"{autograde.MAX_REPORT_CHARS}\]\n", report.text)
    assert dropped and int(dropped.group(1)) > 11, report.text[-200:]
    assert len(report.text) < autograde.MAX_REPORT_CHARS + 200
    assert report.text.count("r") > autograde.MAX_REPORT_CHARS * 0.9   # the report's start is kept
    assert error.evalue == "e" * autograde.MAX_ERROR_CHARS + (
        f" [10 more characters dropped: an error's text is capped at {autograde.MAX_ERROR_CHARS}]")
    late, = grading.outputs["stuck"]
    assert late.evalue == ("not graded: the hidden tests of this submission ran past 2 s (the cap on one "
                           "submission's grading)")
    assert ("error", "The hidden tests did not finish within 2 s (StartTrustedGrading.time_limit): stuck") in log.lines
    assert all(len(line) < autograde.MAX_ERROR_CHARS + 200 for _, line in log.lines)


# --- the notebook's run -------------------------------------------------------------------------------

def _run_notebook(config: Config, *sources: str) -> tuple[nbformat.NotebookNode, int]:
    """The notebook of these cells run by SandboxedExecute (a sandboxed kernel), and how far this process's
    resident memory rose above where it was (VmHWM, reset first)."""
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = new_notebook(cells=[new_code_cell(s) for s in sources], metadata={"kernelspec": kernelspec})
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    nb, _ = autograde.SandboxedExecute(config=config).preprocess(nb, {"metadata": {"path": "/tmp"}})
    return nb, _status("VmHWM") - before


def _status(field: str) -> int:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) << 10


def _texts(cell) -> list[str]:
    return [o.get("text", "") for o in cell.outputs]


def test_the_notebooks_outputs_are_capped_while_it_runs_and_an_oversized_message_is_never_read():
    config = Config()
    config.SandboxedExecute.max_cell_output = MIB
    config.SandboxedExecute.max_notebook_output = 2 * MIB
    flood = "import sys\nfor _ in range({n}):\n    print('y' * {size})\n    sys.stdout.flush()"
    nb, grew = _run_notebook(
        config,
        flood.format(n=256, size=(256 << 10) - 1),                  # 64 MiB in 256 messages: past the cell's cap
        "print('k' * (512 << 10))",                                 # kept: 1.5 MiB of the notebook's 2
        "print('n' * (768 << 10))",                                 # past the notebook's cap
        f"raise ValueError('e' * {2 * autograde.MAX_ERROR_CHARS})",  # only the reply's error, its text capped
        "import sys\nsys.stdout.write('z' * (64 << 20))\nsys.stdout.flush()",   # one message of 64 MiB
        "print('never')")
    flooded, kept, dropped, failed, oversized, after = nb.cells
    *lines, note = _texts(flooded)   # a print may come in two messages: its text, then its newline
    assert "".join(lines) == ("y" * ((256 << 10) - 1) + "\n") * 3
    assert note == "\n[output beyond 1048576 bytes was dropped (cap: 1048576 bytes of output per cell during " \
                   "autograde)]\n"
    assert "".join(_texts(kept)) == "k" * (512 << 10) + "\n"
    assert _texts(dropped) == ["\n[output beyond 2097152 bytes was dropped (cap: 2097152 bytes of output per "
                               "notebook during autograde)]\n"]
    assert [o.output_type for o in failed.outputs] == ["stream", "error"]
    assert failed.outputs[1].evalue.endswith(f"[{autograde.MAX_ERROR_CHARS} more characters dropped: an error's "
                                             f"text is capped at {autograde.MAX_ERROR_CHARS}]")
    assert _texts(oversized) == [f"\n[the notebook stopped here: its kernel's iopub channel closed, as it does when "
                                 f"the kernel sends a message larger than {autograde.MAX_MESSAGE_BYTES} bytes (the "
                                 "cap on one message from the notebook's kernel)]\n"]
    assert after.outputs == []
    assert grew < 48 * MIB, f"this process grew by {grew / MIB:.0f} MiB"


def test_the_notebooks_run_stops_at_its_time_limit():
    config = Config()
    config.SandboxedExecute.time_limit = 3
    start = time.monotonic()
    nb, _ = _run_notebook(config, "import time\ntime.sleep(60)", "print('late')")
    assert time.monotonic() - start < 20
    assert nb.cells[0].outputs[-1].ename == "CellTimeoutError"
    assert _texts(nb.cells[1]) == ["\n[not run: the notebook ran for its 3 s (the cap on a notebook's run during "
                                   "autograde)]\n"]
