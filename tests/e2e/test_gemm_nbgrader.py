"""nbgrader and the GEMM worklog on a machine without a GPU: the release, and a refused autograde."""
from __future__ import annotations

from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.grade import check_compiles
from graders.cuda_engine.structure import load_structure
from workshop import course as nbg
from workshop import submissions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec("gemm")
STRUCTURE = load_structure("gemm")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return nbg.Course(tmp_path_factory.mktemp("gemm-course"), "gemm")


def _cells(nb) -> dict[str, str]:
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if "nbgrader" in c.metadata}


def test_release_has_no_solution_code_and_no_hidden_tests(course):
    text = "\n".join(cell.source for cell in course.release.cells)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    for call in ("score(", "score_autotuned(", "check_sass(", "check_search("):
        assert f"\n{call}" not in text and not any(c.source.startswith(call) for c in course.release.cells), call
    assert text.count("raise NotImplementedError()") == len(SPEC.kernels)
    lines = set(text.splitlines())
    for kid, kernel in SPEC.kernels.items():
        reference = kernel.reference.read_text().splitlines()
        start = next(i for i, line in enumerate(reference) if line.rstrip() == "{") + 1
        body = reference[start:-1]
        leaked = [line for line in body if len(line.strip()) > 12 and line in lines]
        assert not leaked, (kid, leaked)
    graded = {gid for gid, src in _cells(course.release).items() if src.startswith("# Hidden test")}
    assert graded == ({f"{k}_score" for k in SPEC.kernels} | set(STRUCTURE.checks) | {STRUCTURE.autotune.check_id})


def test_the_stub_fails_to_compile_with_a_message(course):
    namespace: dict = {}
    exec(_cells(course.release)["warptiling"], namespace)
    with pytest.raises(CompileError, match="Your CUDA code did not compile"):
        check_compiles("gemm", "warptiling", namespace["warptiling_src"])


def test_autograde_without_a_gpu_stops_and_records_no_scores(course, monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")   # inherited by nbgrader and its notebook kernel
    nbg.add_student(course.root, "cpu", "Cpu", "Worker")
    submissions.write(course.root, "cpu", "gemm", submissions.fill(course.release, submissions.gemm_answers()))
    done = nbg.nbgrader(course.root, "autograde", "gemm", "--student=cpu", "--force", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "needs a GPU worker" in output and "Nothing was graded" in output
    assert not (course.root / "autograded" / "cpu" / "gemm" / "gemm.ipynb").exists()
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        grades = [g for nb in gb.find_submission("gemm", "cpu").notebooks for g in nb.grades]
        assert grades and all(g.auto_score is None and g.manual_score is None for g in grades)
