"""A long message is wrapped, never cut off unsaid: a graded cell's outputs (what formgrader and the feedback
show) in the lines ``nbgrader validate`` shows a failure in, and ``workshop demo``'s summary."""
from __future__ import annotations

from nbgrader.utils import determine_grade
from nbformat.v4 import new_code_cell

from graders.autograde import _outputs
from graders import hidden_tests
from graders.hidden_tests import LINE_WIDTH, wrapped
from workshop.demo import MESSAGE_CHARS, _wrapped

GUARDS = ("Guards: case 1 of 3 (hidden, seed 2754077666842217783): a[4]; size = 4; <<<1, 8>>>: the kernel failed: "
          "IndexError: threadIdx (4, 0, 0) of blockIdx (0, 0, 0): out-of-bounds read of a[4] (shape (4,))")


def words(text: str) -> str:
    return " ".join(text.split())


def test_a_failure_in_formgrader_and_the_feedback_has_the_lines_validate_shows():
    failed = hidden_tests.TestFailed(GUARDS)
    (error,) = _outputs("", error=failed)
    assert error.traceback == failed._render_traceback_() and len(error.traceback) == 3
    assert all(len(line) <= LINE_WIDTH for line in error.traceback)
    assert words("\n".join(error.traceback)) == f"TestFailed: {GUARDS}"
    assert error.evalue == GUARDS   # the autograde log's and the exports' one line
    cell = new_code_cell("", metadata={"nbgrader": {"grade": True, "solution": False, "points": 2}})
    cell.outputs = [error]
    assert determine_grade(cell) == (0, 2)


def test_a_report_keeps_its_short_lines_and_wraps_its_long_ones():
    report = f"tiled: incorrect\n  {'x' * 200}\n{GUARDS}\n"
    (stream,) = _outputs(report)
    lines = stream.text.splitlines()
    assert lines[0] == "tiled: incorrect" and all(len(line) <= LINE_WIDTH for line in lines)
    assert words(stream.text) == words(report).replace("x" * 200, " ".join(["x" * 81, "x" * 79, "x" * 40]))
    assert wrapped("short\n\n  indented") == ["short", "", "  indented"]


def test_the_demos_summary_wraps_a_message_and_cuts_a_longer_one_with_an_ellipsis():
    short = _wrapped(f"guard_correct: PuzzleFailed: {GUARDS}")
    assert words(short) == f"guard_correct: PuzzleFailed: {GUARDS}"
    assert all(len(line) <= 100 for line in short.splitlines()) and short.startswith(" " * 6 + "guard_correct")
    long = _wrapped("cell: " + "word " * 1000)
    assert words(long).endswith("word …") and len(words(long)) <= MESSAGE_CHARS
