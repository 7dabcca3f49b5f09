"""The trusted grader's reading of a submission: parsed from the file, never run (graders/submission.py)."""
from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from graders.settings import ROOT
from graders.cuda_engine.structure import check_sass
from graders.cuda_engine.grade import KernelFailed
from graders.submission import Submission, SubmissionError, SubmittedKernel, hidden_call


def _notebook(*cells: tuple[str, str, bool]) -> nbformat.NotebookNode:
    """Cells as (grade_id, source, is a solution cell); grade_id None for a cell the student added."""
    nb = new_notebook()
    for grade_id, source, solution in cells:
        cell = new_code_cell(source)
        if grade_id:
            cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": False,
                                         "locked": not solution, "schema_version": 3}
        nb.cells.append(cell)
    return nb


KERNEL = "@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n    out[i] = a[i] + 10\n"


def test_literals_and_kernels_come_from_solution_cells_last_definition_winning():
    nb = _notebook(("naive", 'naive_src = r"""first"""\nspace = {"BM": [64, 128]}', True),
                   ("naive2", 'naive_src = "second"\nblock = (32, 8)', True),
                   ("map", KERNEL, True))
    submission = Submission(nb)
    assert submission.value("naive_src") == "second"
    assert submission.value("space") == {"BM": [64, 128]} and submission.value("block") == (32, 8)
    kernel = submission.value("map_kernel")
    assert isinstance(kernel, SubmittedKernel) and kernel.name == "map_kernel" and "a[i] + 10" in kernel.source


def test_a_class_is_the_one_defined_last_above_the_test_cell():
    """Each problem of a model track defines its own ModelNew: its test cell grades the one above it."""
    first, second = "class ModelNew:\n    size = 1\n", "class ModelNew:\n    size = 2\n"
    nb = _notebook(("early_score", "score_model('t', 'early', ModelNew)", False), ("one", first, True),
                   ("one_score", "score_model('t', 'one', ModelNew)", False), ("two", second, True),
                   ("two_score", "score_model('t', 'two', ModelNew)", False), (None, "class ModelNew: pass", False))
    submission = Submission(nb)
    name = hidden_call("score_model('t', 'one', ModelNew)", {"score_model"}).args[2]
    assert submission.resolve(name, at="one_score").source == first
    assert submission.resolve(name, at="two_score").source == second
    with pytest.raises(SubmissionError, match="no solution cell above early_score defines the class ModelNew"):
        submission.resolve(name, at="early_score")


def test_a_cell_the_student_added_and_the_notebook_namespace_are_never_read():
    nb = _notebook(("map", "# YOUR CODE HERE", True), (None, KERNEL, False),
                   ("setup", "naive_src = 'from a locked cell'", False))
    submission = Submission(nb)
    for name in ("map_kernel", "naive_src"):
        with pytest.raises(SubmissionError, match=f"do not define {name}"):
            submission.value(name)


@pytest.mark.parametrize("source", [
    "naive_src = open('/work/main/tracks/transpose/solutions/naive.cu').read()",
    "naive_src = HEADER + 'body'",
    "naive_src = __import__('os').getenv('X')",
    "naive_src = f'{x}'",
])
def test_a_value_computed_by_code_is_refused_not_run(source):
    submission = Submission(_notebook(("naive", source, True)))
    with pytest.raises(SubmissionError, match="must be a literal"):
        submission.value("naive_src")


def test_a_solution_cell_that_does_not_parse_is_named():
    submission = Submission(_notebook(("naive", "naive_src = '''unclosed", True)))
    with pytest.raises(SubmissionError, match="do not parse: naive"):
        submission.value("naive_src")


def test_hidden_call_takes_exactly_one_known_call_and_ignores_imports():
    call = hidden_call("# Hidden test\nfrom graders.numba_engine.grade import grade_correctness\n"
                       "grade_correctness('map', map_kernel)\n", {"grade_correctness"})
    assert call.function == "grade_correctness" and len(call.args) == 2
    with pytest.raises(SubmissionError, match="holds 0 grading calls"):
        hidden_call("print('no test here')", {"grade_correctness"})
    with pytest.raises(SubmissionError, match="holds 2 grading calls"):
        hidden_call("score('a', 'b', x)\nscore('a', 'c', y)", {"score"})


def test_a_kernel_that_includes_the_reference_solution_does_not_compile():
    """NVRTC reads #include files from disk; the compiling child's sandbox has no solutions/ in it."""
    reference = ROOT / "tracks" / "gemm" / "solutions" / "vectorized.cu"
    assert reference.exists()
    with pytest.raises(KernelFailed, match="compile_error"):
        check_sass("gemm", "vectorized_sass", f'#include "{reference}"\n')
