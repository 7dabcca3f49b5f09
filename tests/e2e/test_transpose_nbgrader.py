"""nbgrader and the transpose assignment on a machine without a GPU: the release, and a refused autograde."""
from __future__ import annotations

import pytest
from nbgrader.api import Gradebook

from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.grade import check_compiles
from transpose_cells import SPEC, slow_source
from workshop import course as nbg
from workshop import submissions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return nbg.Course(tmp_path_factory.mktemp("transpose-course"), "transpose")


def _cells(nb) -> dict[str, str]:
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if "nbgrader" in c.metadata}


def test_release_has_no_solution_code_and_no_hidden_tests(course):
    text = "\n".join(cell.source for cell in course.release.cells)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    assert "score(" not in text, "the hidden score calls must not be released"
    assert text.count("raise NotImplementedError()") == len(SPEC.kernels)
    lines = set(text.splitlines())
    for kid, kernel in SPEC.kernels.items():
        reference = kernel.reference.read_text().splitlines()
        body = reference[next(i for i, line in enumerate(reference) if line.startswith('extern "C"')) + 2:-1]
        leaked = [line for line in body if len(line.strip()) > 12 and line in lines]
        assert not leaked, (kid, leaked)
    for grade_id, source in _cells(course.release).items():
        if grade_id.endswith("_score"):
            assert "score(" not in source and source.startswith("# Hidden test")


def test_the_stub_fails_to_compile_with_a_message():
    """nbgrader's stub (Python lines inside the C++ string) is a compile error, not a crash."""
    stub = submissions.transpose_cell("naive", 'extern "C" __global__ void transpose_naive(float* out, '
                                      'const float* in, int rows, int cols)\n{\n# YOUR CODE HERE\n'
                                      'raise NotImplementedError()\n}')
    namespace: dict = {}
    exec(stub, namespace)
    with pytest.raises(CompileError, match="Your CUDA code did not compile"):
        check_compiles("transpose", "naive", namespace["naive_src"])


@pytest.mark.parametrize("kernel_id", ["tiled", "padded", "best"])
def test_the_slow_submission_compiles(kernel_id):
    assert check_compiles("transpose", kernel_id, slow_source(kernel_id))


def test_autograde_without_a_gpu_stops_and_records_no_scores(course, monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")   # inherited by nbgrader and its notebook kernel
    nbg.add_student(course.root, "cpu", "Cpu", "Worker")
    submissions.write(course.root, "cpu", "transpose",
                      submissions.fill(course.release, submissions.transpose_answers()))
    done = nbg.nbgrader(course.root, "autograde", "transpose", "--student=cpu", "--force", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "needs a GPU worker" in output and "Nothing was graded" in output
    assert "Removing failed assignment" in output
    assert not (course.root / "autograded" / "cpu" / "transpose" / "transpose.ipynb").exists()
    # What lands in the gradebook: the submission and one grade per test cell, with no automatic score
    # (NULL, not 0) and flagged for manual grading; nbgrader's Grade.score reads that as 0, so a
    # re-run on a GPU worker (autograde --force) is what fills them in.
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        grades = [g for nb in gb.find_submission("transpose", "cpu").notebooks for g in nb.grades]
        assert {g.name for g in grades} == {f"{kid}_score" for kid in SPEC.kernels}
        assert all(g.auto_score is None and g.manual_score is None and g.needs_manual_grade for g in grades)
