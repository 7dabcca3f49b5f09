"""``nbgrader validate`` tells the student the truth, for every assignment (real nbgrader, real kernels): it fails on
the untouched stub and on a notebook with one wrong kernel, naming that kernel, and passes the reference (of the
CUDA tracks, `CUDA_REFERENCE`'s). Puzzles run on the simulator; the CUDA tracks compile (no GPU here), so there the
wrong kernel is one that does not compile; and without a GPU the CPU preview runs what compiles, so a kernel that
compiles but races fails too, with the preview's line. The Triton track's check runs Triton's interpreter, so there
the wrong kernel is a softmax without its max; the TileLang track's compiles only, so there it is one TileLang
refuses; a model track's check runs each ModelNew on the CPU, so there it is one whose output is wrong
(`MODEL_WRONG`). A quiz's graded cells check only an answer's form (the key stays with the grader), so there the
wrong answer is an option its question does not have; one quiz runs here, every quiz's checks in
tests/engines/test_quiz_engine.py; likewise one model track. The released CUDA stubs compile, and their check cells
say so in one line each."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbgrader.utils import is_grade, is_solution

from graders import tracks
from graders.cuda_engine.spec import load_spec
from graders.notebook import EDIT_LANGUAGE
from graders.quiz_engine.questions import REFERENCE_STUDENT, Choice
from graders.roofline_engine.grade import reference_answer
from workshop import course as nbg
from workshop import submissions

pytestmark = pytest.mark.slow
QUIZ = "quiz_l1"   # the quizzes share one notebook builder and check: every quiz's checks run in-process
MODEL = "kernelbench"   # the model tracks too (graders/model_engine/notebook.py); the capstone's references and
# known-wrong solutions are graded on the CPU in tests/tracks/test_capstone.py
# A CUDA track's reference notebook runs the CPU preview of every reference kernel, which tests/tracks/
# test_cpu_preview.py (and each track's own tests) run too: one CUDA track's reference goes through nbgrader validate
# here, and its wrong kernel among the references (only that kernel's cells fail); every other CUDA track's stub, and
# its wrong kernel among the release's stubs (its cells fail with NVRTC's line, the others are not written yet). The
# TileLang track likewise: its check compiles each reference (about 25 s here in all), as
# tests/engines/test_tilelang_engine.py does.
CUDA_REFERENCE = "transpose"
# The CUTLASS track's cells go through the CUDA tracks' check and graded cells, each CuTe kernel 7-25 s to compile:
# its check cell against the headers is tested in tests/tracks/test_cutlass.py, its released stub through nbgrader in
# tests/e2e/test_cuda_tracks_nbgrader.py.
TRACKS = [t for t in tracks.all_tracks()
          if (t.engine not in ("quiz", "model") or t.name in (QUIZ, MODEL)) and t.name != "cutlass"]
FAILED = re.compile(r"VALIDATION FAILED ON (\d+) CELL\(S\)")
# The first line nbgrader validate writes for each notebook (nbgrader.validator.Validator.validate_and_print)
VERDICT = re.compile(r"^(Success! Your notebook passes all the tests\.|VALIDATION FAILED ON \d+ CELL\(S\)|"
                     r"THE TYPES OF \d+ CELL\(S\) HAVE CHANGED|THE CONTENTS OF \d+ TEST CELL\(S\) HAVE CHANGED)",
                     re.MULTILINE)
MODEL_WRONG = {"kernelbench": "relu_returns_input.py"}
PORT_TAKEN = "zmq.error.ZMQError: Address already in use"   # a kernel's start lost a race for its port


@pytest.fixture(scope="module")
def courses(released, tmp_path_factory) -> dict[str, Path]:
    """Track name -> a copy of the course with its assignment generated (conftest.py's `released`)."""
    root = tmp_path_factory.mktemp("validate")
    return {name: shutil.copytree(course, root / name, symlinks=True) for name, course in released.items()}


def _release(course: Path, track: str) -> nbformat.NotebookNode:
    return nbformat.read(str(course / "release" / track / f"{track}.ipynb"), as_version=4)


def _wrong(track: tracks.Track) -> tuple[dict[str, str], str]:
    """A whole notebook's answers with one kernel wrong, and that kernel's title or id."""
    if track.engine == "numba":
        return submissions.wrong_answers("zip_subtracts"), "Zip"
    if track.engine == "quiz":   # an answer of the wrong form: an option the question does not have
        first = next(q for q in track.problem_module().QUESTIONS if isinstance(q, Choice))
        return submissions.quiz_answers(track.name, REFERENCE_STUDENT) | {first.id: f'{first.id} = "z"'}, first.id
    if track.engine == "roofline":   # a prediction of the wrong form: a regime there is not
        return _roofline_answers(track) | {"softmax": 'softmax = {"regime": "fast", "intensity": 1, "time_us": 1}'}, \
            "softmax"
    if track.engine == "triton":   # the check finds it wrong in Triton's interpreter
        path = track.solutions / "wrong" / "softmax_no_max.py"
        return submissions.cuda_answers(track.name) | {"softmax": path.read_text()}, "softmax"
    if track.engine == "tilelang":   # without a GPU the check compiles: a kernel TileLang refuses
        path = track.solutions / "wrong" / "compile_error.py"
        return submissions.cuda_answers(track.name) | {"matmul_fp16": path.read_text()}, "matmul_fp16"
    if track.engine == "model":   # the check runs the model on the CPU: an output that is its own input
        path = track.solutions / "wrong" / MODEL_WRONG[track.name]
        return submissions.cuda_answers(track.name) | {tracks.graded_kernel(path): path.read_text()}, \
            tracks.graded_kernel(path)
    path = track.solutions / "wrong" / "compile_error.cu"
    kernel = tracks.graded_kernel(path)
    return submissions.cuda_answers(track.name, {kernel: path.read_text()}), kernel


def _roofline_answers(track: tracks.Track) -> dict[str, str]:
    """A roofline track's reference predictions, by grade_id."""
    return {op.id: f"{op.id} = {reference_answer(track.name, op.id)!r}" for op in track.problem_module().OPERATIONS}


def _validate(course: Path, track: tracks.Track, *jobs: tuple[str, dict[str, str]]) -> list[str]:
    """``nbgrader validate`` of a notebook of each job's answers (``(name, answers)``), all in one nbgrader process
    (one start-up, not one a notebook; each notebook runs in a kernel of its own): each notebook's part of the
    output, in order. Each part begins with the line nbgrader writes first for every notebook (`VERDICT`)."""
    release = _release(course, track.name)
    paths = [course / "student" / track.name / f"{name}.ipynb" for name, _ in jobs]
    for path, (_, answers) in zip(paths, jobs):
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(submissions.fill(release, answers), str(path))
    done = nbg.nbgrader(course, "validate", *map(str, paths), check=False)
    if done.returncode and PORT_TAKEN in done.stdout + done.stderr:   # once more: the kernel's TCP ports are
        done = nbg.nbgrader(course, "validate", *map(str, paths), check=False)   # chosen before it binds them
    assert done.returncode == 0, done.stdout + done.stderr
    starts = [m.start() for m in VERDICT.finditer(done.stdout)]
    assert len(starts) == len(jobs) and done.stdout[:starts[0]].strip() == "", done.stdout
    return [done.stdout[a:b] for a, b in zip(starts, [*starts[1:], len(done.stdout)])]


@pytest.mark.parametrize("track", TRACKS, ids=lambda t: t.name)
def test_validate_fails_the_stub_and_one_wrong_kernel_and_passes_the_reference(courses, track):
    course = courses[track.name]
    release = _release(course, track.name)
    graded = [c for c in release.cells if is_grade(c)]

    answers, kernel = _wrong(track)
    reference_answers = (submissions.reference_answers() if track.engine == "numba"
                         else submissions.quiz_answers(track.name, REFERENCE_STUDENT) if track.engine == "quiz"
                         else _roofline_answers(track) if track.engine == "roofline"
                         else submissions.cuda_answers(track.name))
    jobs = [("stub", {}), ("wrong", answers), ("reference", reference_answers)]
    among_stubs = track.engine in ("cuda", "tilelang") and track.name != CUDA_REFERENCE   # see CUDA_REFERENCE
    if among_stubs:
        jobs[1:] = [("wrong", {kernel: answers[kernel]})]
    stub, wrong, *reference = _validate(course, track, *jobs)

    # a release that keeps its kernels, sabotaged (the debugging track's), fails on its answers only: they compile
    kept = len(load_spec(track.name).kernels) if release.metadata.kernelspec.language == EDIT_LANGUAGE else 0
    assert int(FAILED.search(stub).group(1)) == len(graded) - kept, stub
    assert "not written yet" in stub and "Traceback" not in stub

    assert FAILED.search(wrong), wrong
    failed_cells = re.findall(r"The following cell failed:\n\n(.*?)\n\nThe error was:\n\n(.*?)\n\n", wrong, re.DOTALL)
    assert failed_cells and "Traceback" not in wrong
    named = 0
    for source, error in failed_cells:   # only the wrong kernel's graded cells, each naming it (and the stubs')
        if re.search(rf"\b{kernel.lower()}\b", source.lower()):
            assert re.match(rf"\s*(PuzzleFailed|KernelFailed|AnswerFailed): {kernel}: ", error), error
            named += 1
        else:
            assert among_stubs and "not written yet" in error, (source, error)
    assert named, wrong
    if track.engine == "cuda":
        assert "Your CUDA code did not compile" in wrong and re.search(r"line \d+: error", wrong)

    assert all("Success! Your notebook passes all the tests." in out for out in reference), reference


def test_validate_fails_a_kernel_that_compiles_but_races_with_the_cpu_previews_line(courses):
    """Issue 28's tiled transpose without its __syncthreads(): only its graded cell fails, with the preview's ✗."""
    track = tracks.get("transpose")
    racy = (track.solutions / "tiled.cu").read_text().replace("    __syncthreads();\n", "")
    out, = _validate(courses["transpose"], track, ("racy", submissions.cuda_answers("transpose", {"tiled": racy})))
    assert int(FAILED.search(out).group(1)) == 1 and "Traceback" not in out, out
    (source, error), = re.findall(r"The following cell failed:\n\n(.*?)\n\nThe error was:\n\n(.*?)\n\n", out, re.DOTALL)
    assert "assert_compiles('transpose', 'tiled', tiled_src)" in source
    assert " ".join(error.split()).startswith(
        "KernelFailed: tiled: CPU preview, shape 33 x 65 (rows, cols): a race (a missing __syncthreads()?) or a "
        "read of __shared__ memory no thread wrote: the result depends on the order in which threads run between "
        "barriers, or on what __shared__ memory held before; "), error


@pytest.mark.parametrize("track", ["gemm", "transpose"])
def test_untouched_cuda_stub_check_cells_print_one_line_and_no_traceback(courses, track):
    """The released notebook run in a real kernel: every check cell prints one line and raises nothing."""
    course = courses[track]
    release = _release(course, track)
    assert all("// YOUR CODE HERE" in c.source for c in release.cells if is_solution(c))
    NotebookClient(release, timeout=120, allow_errors=True, resources={"metadata": {"path": str(course)}}).execute()
    checks = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_check")]
    assert checks
    for cell in checks:
        kernel = cell.metadata.nbgrader["grade_id"].removesuffix("_check")
        assert {(o.output_type, o.get("name")) for o in cell.outputs} == {("stream", "stdout")}, cell.outputs
        text = "".join(o.text for o in cell.outputs)
        assert text == f"✗ {kernel}: not written yet (its body is still the stub's comment)\n"
    for cell in (c for c in release.cells if is_grade(c)):   # the graded cells' public test: the same line
        (error,) = [o for o in cell.outputs if o.output_type == "error"]
        assert error.ename == "KernelFailed" and len(error.traceback) == 1, error
