"""Every track folder is whole and its notebook is right: a spec its engine reads, its notebook.py, its
solutions; a committed notebook that is exactly what `workshop build` writes, whose graded cells are the
spec's; and a release (real ``nbgrader generate_assignment``) with no solution and no hidden test in it."""
from __future__ import annotations

import os
import re

import nbformat
import pytest
from nbgrader.utils import is_grade, is_locked, is_solution

from graders import tracks
from graders.cuda_engine.spec import load_spec
from graders.cuda_engine.structure import load_structure
from graders.model_engine.spec import load_model_spec
from graders.notebook import CUDA_LANGUAGE, CUDA_STUB, EDIT_LANGUAGE, EDIT_STUB, MODEL_LANGUAGE, MODEL_STUB
from graders.numba_engine import catalogue
from graders.quiz_engine.grade import right_answer
from graders.quiz_engine.notebook import QUIZ_LANGUAGE, QUIZ_STUB, answer_literal
from graders.quiz_engine.questions import REFERENCE_STUDENT
from graders.result import Status
from graders.roofline_engine.grade import reference_answer
from graders.roofline_engine.scoring import Rules
from graders.tilelang_engine.spec import load_tilelang_spec
from graders.triton_engine.spec import load_triton_spec
from workshop import notebooks
from workshop.cells import read_cells, strip_solution_markers

TRACKS = tracks.all_tracks()
by_name = pytest.mark.parametrize("track", TRACKS, ids=lambda t: t.name)
# What nbgrader removes from a release: the lines between solution or hidden-test markers
_SECRET = re.compile(r"^[ \t]*### BEGIN (SOLUTION|HIDDEN TESTS)[ \t]*\n(.*?)^[ \t]*### END \1[ \t]*$",
                     re.MULTILINE | re.DOTALL)


def _cells(track: tracks.Track) -> dict[str, nbformat.NotebookNode]:
    """The committed notebook's nbgrader cells, by grade_id."""
    nb = nbformat.read(str(track.notebook_path), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}


def _kernels(track: tracks.Track) -> dict:
    """A CUDA, Triton or TileLang track's kernels (`graders.cuda_engine.spec.KernelSpec`), by id."""
    if track.engine == "tilelang":
        return load_tilelang_spec(track.name).kernels
    return (load_triton_spec(track.name).assignment if track.engine == "triton" else load_spec(track.name)).kernels


def _questions(track: tracks.Track) -> list:
    """The literal-answer questions a track brings (`graders.quiz_engine`): a quiz's, or a CUDA track's beside its
    kernels (the debugging track's diagnosis)."""
    module = track.problem_module()
    return list(getattr(module, "QUESTIONS", [])) if module else []


def _points(track: tracks.Track) -> dict[str, float]:
    """What the spec says each graded cell is worth, by grade_id."""
    if track.engine == "roofline":
        points = Rules.from_spec(track.assignment).max_points
        return {f"{op.id}_score": points for op in track.problem_module().OPERATIONS}
    if track.engine == "numba":
        spec = track.assignment
        return {f"{p.id}_{part}": float(spec[f"points_{part}"])
                for p in track.problem_module().PUZZLES for part in ("correct", "limits")}
    if track.engine == "model":
        spec = load_model_spec(track.name)
        return {f"{pid}_score": spec.max_points for pid in spec.problems}
    points = {f"{q.id}_score": float(q.points) for q in _questions(track)}
    if track.engine == "quiz":
        return points
    points |= {f"{kid}_score": k.points for kid, k in _kernels(track).items()}
    if (track.folder / "structure.toml").is_file():
        structure = load_structure(track.name)
        points |= {c.id: c.points for c in structure.checks.values()}
        if structure.autotune:
            points[structure.autotune.check_id] = structure.autotune.points
    return points


def _answers(track: tracks.Track) -> dict[str, str]:
    """What each solution cell holds once nbgrader's markers are stripped, by grade_id: the reference."""
    if track.engine == "roofline":
        return {op.id: f"{op.id} = {answer_literal(reference_answer(track.name, op.id))}"
                for op in track.problem_module().OPERATIONS}
    if track.engine == "numba":
        cells = read_cells(track.solutions / "reference.py")
        return {p.id: strip_solution_markers(cells[p.id]) for p in track.problem_module().PUZZLES}
    if track.engine == "model":
        return {pid: re.sub(r"\A(#[^\n]*\n)+", "", p.reference.read_text()).strip("\n")
                for pid, p in load_model_spec(track.name).problems.items()}
    answers = {q.id: f"{q.id} = {answer_literal(right_answer(track.name, q, REFERENCE_STUDENT))}"
               for q in _questions(track)}
    if track.engine == "quiz":
        return answers
    comment = "#" if track.engine in ("triton", "tilelang") else "//"
    for kid, kernel in _kernels(track).items():
        lines = kernel.reference.read_text().rstrip("\n").split("\n")
        answers[kid] = "\n".join(lines[next(i for i, line in enumerate(lines) if not line.startswith(comment)):])
    return answers


def test_there_are_tracks_of_every_engine():
    assert {t.engine for t in TRACKS} == set(tracks.ENGINES)


@by_name
def test_track_has_every_part(track):
    if track.engine in ("cuda", "triton", "tilelang"):
        kernels = _kernels(track)
        assert kernels and all(k.reference.is_file() for k in kernels.values())
    elif track.engine == "roofline":
        assert track.problem_module().OPERATIONS and (track.folder / "key.py").is_file()
    elif track.engine == "quiz":
        assert track.problem_module().QUESTIONS and (track.folder / "key.py").is_file()
    elif track.engine == "model":
        problems = load_model_spec(track.name).problems
        assert problems and all(p.reference.is_file() and p.id in track.problem_module().SOURCES
                                for p in problems.values())
    else:
        puzzles = track.problem_module().PUZZLES
        assert puzzles and all(catalogue.get(p.id) is p for p in puzzles)
        assert (track.solutions / "reference.py").is_file()
    assert (track.folder / "notebook.py").is_file(), f"{track.folder}: no notebook.py"
    assert track.solutions.is_dir(), f"{track.folder}: no solutions/"
    graded = {gid for gid, cell in _cells(track).items() if is_grade(cell)}
    for wrong in track.wrong_solutions():
        expected = tracks.expected_points(wrong)
        assert expected and set(expected) <= graded, f"{wrong}: its expect: line names no graded cell of the notebook"
        if track.engine in ("cuda", "triton", "model", "tilelang"):
            statuses = tracks.expected_statuses(wrong)
            assert statuses and set(statuses) <= set(Status), f"{wrong}: status: line outside graders.result.Status"


@by_name
def test_committed_notebook_is_what_workshop_build_writes(track):
    assert not notebooks.is_stale(track), f"{track.notebook_path} is stale: run `workshop build {track.name}`"


@by_name
def test_graded_cells_are_the_specs(track):
    cells = _cells(track)
    graded = {gid: cell.metadata.nbgrader["points"] for gid, cell in cells.items() if is_grade(cell)}
    assert graded == _points(track)
    assert all(is_locked(cell) and "### BEGIN HIDDEN TESTS" in cell.source
               for cell in cells.values() if is_grade(cell))


@by_name
def test_solution_cells_hold_the_reference(track):
    cells = _cells(track)
    answers = _answers(track)
    assert {gid for gid, cell in cells.items() if is_solution(cell)} == set(answers)
    for gid, answer in answers.items():
        assert "### BEGIN SOLUTION" in cells[gid].source, gid
        assert answer in strip_solution_markers(cells[gid].source), gid
        literal = track.engine == "roofline" or gid in {q.id for q in _questions(track)}
        if not literal:   # a literal answer's form is checked in its graded cell
            assert is_locked(cells[f"{gid}_check"]), f"{gid}: no read-only self-check cell"


@by_name
def test_a_check_cell_run_before_its_kernels_cell_says_which_cell_to_run(track, capsys):
    """After the setup cell but before the kernel's own cell, each check cell prints one line naming what that
    cell defines (the kernel, its source), as its check's own lines begin (the puzzle's title, the kernel's id),
    not a NameError."""
    if track.engine in ("quiz", "roofline"):
        pytest.skip("a quiz has no check cells: its graded cells check an answer's form")
    cells = _cells(track)
    if track.engine == "numba":
        kernels = {p.id: (p.title, p.kernel_name) for p in track.problem_module().PUZZLES}
    elif track.engine in ("triton", "tilelang"):
        kernels = {kid: (kid, k.function) for kid, k in _kernels(track).items()}
    elif track.engine == "model":
        kernels = {pid: (pid, "ModelNew") for pid in load_model_spec(track.name).problems}
    else:
        kernels = {kid: (kid, f"{kid}_src") for kid in load_spec(track.name).kernels}
    namespace: dict = {}
    environment = dict(os.environ)
    exec(cells["setup"].source, namespace)
    os.environ.clear()   # importing tilelang sets PYTHONPATH and TVM's paths, which later children would inherit
    os.environ.update(environment)
    capsys.readouterr()
    for gid, (label, name) in kernels.items():
        exec(cells[f"{gid}_check"].source, namespace)
        assert capsys.readouterr().out == f"✗ {label}: {name} is not defined: run the cell that defines {name} first\n"


@pytest.mark.slow
@by_name
def test_release_holds_no_solution_and_no_hidden_test(track, released):
    folder = released[track.name] / "release" / track.name   # real `nbgrader generate_assignment` (conftest.py)
    release = nbformat.read(str(folder / track.notebook_path.name), as_version=4)
    assert [p.relative_to(folder).as_posix() for p in folder.rglob("*")] == [track.notebook_path.name]
    text = "\n".join(cell.source for cell in release.cells)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    source = "\n".join(cell.source for cell in nbformat.read(str(track.notebook_path), as_version=4).cells)
    secret = {line for m in _SECRET.finditer(source) for line in m.group(2).splitlines() if line.strip()}
    public = set(_SECRET.sub("", source).splitlines())
    assert secret - public
    leaked = (secret - public) & set(text.splitlines())
    assert not leaked, f"released solution or hidden-test lines: {sorted(leaked)}"
    stubs = [c for c in release.cells if is_solution(c)]
    language = nbformat.read(str(track.notebook_path), as_version=4).metadata.kernelspec.language
    stub = {CUDA_LANGUAGE: CUDA_STUB, QUIZ_LANGUAGE: QUIZ_STUB, EDIT_LANGUAGE: EDIT_STUB,
            MODEL_LANGUAGE: MODEL_STUB}.get(
        language, "raise NotImplementedError()")   # nbgrader_config.py
    assert stubs and all(stub in c.source for c in stubs)


def test_unmet_expectation_says_what_differs():
    path = tracks.get("transpose").solutions / "wrong" / "slow_tiled.cu"   # expect: tiled_score=1, status: ok
    assert tracks.unmet_expectation(path, "ok", 1.0) == ""
    assert "status incorrect" in tracks.unmet_expectation(path, "incorrect", 1.0)
    assert "2 points, expected" in tracks.unmet_expectation(path, "ok", 2.0)
