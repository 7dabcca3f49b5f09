"""Grading rules pinned where the mutation run (`mutmut run`, see pyproject's [tool.mutmut]) found them loose.

Each test states a behaviour of the grading engine that a student's points depend on; the mutation
report in benchmarks/results/platform/mutmut-20261203.md names the surviving mutants they were written for.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from graders import settings, tracks
from graders.cuda_engine.scoring import Score, score_kernel
from graders.cuda_engine.spec import load_spec
from graders.numba_engine.puzzle import Case, Puzzle
from graders.numba_engine.traced_array import AccessLog, TracedArray

# --- CUDA scoring -------------------------------------------------------------------------------------


def test_a_wrong_kernel_scores_zero_out_of_the_kernels_full_points():
    padded = load_spec("transpose").kernel("padded")
    for score in (score_kernel(padded, correct=False, ratio=5.0), score_kernel(padded, correct=True, ratio=None)):
        assert (score.correctness, score.performance, score.max) == (0.0, 0.0, padded.points)


def test_a_score_as_a_record_carries_its_parts_and_total():
    assert Score(1.0, 1.5, 3.0).as_dict() == {"correctness": 1.0, "performance": 1.5, "max": 3.0, "total": 2.5}


# --- numba puzzles: inputs and the expected output --------------------------------------------------------


def _puzzle(reference=lambda a: a + 1) -> Puzzle:
    return Puzzle(number=0, id="t", title="t", statement="", kernel_name="k", reference=reference,
                  case=lambda n: Case(inputs=((n,),), out=(n,), blocks=(1,), threads=(n,), scalars=()))


def test_puzzle_inputs_are_float32_integers_from_minus_9_to_9():
    puzzle = _puzzle()
    (x,) = puzzle.make_inputs(puzzle.case(5000), np.random.default_rng(0))
    assert x.dtype == np.float32 and x.shape == (5000,)
    assert np.array_equal(x, np.round(x))
    assert x.min() == -9 and x.max() == 9   # both ends reached: 5000 draws from 19 values


def test_expected_output_is_float64_whatever_the_reference_returns():
    puzzle = _puzzle(reference=lambda a: (a + 1).astype(np.float32))
    case = puzzle.case(4)
    out = puzzle.expected(case, [np.arange(4, dtype=np.float32)])
    assert out.dtype == np.float64 and out.tolist() == [1, 2, 3, 4]


# --- traced arrays: sizes and the messages students read ---------------------------------------------------


def test_len_of_a_traced_array_is_its_first_dimension():
    assert len(TracedArray("a", np.zeros((2, 5), np.float32), AccessLog())) == 2
    assert len(TracedArray("a", np.zeros((2, 5), np.float32), AccessLog())[1]) == 5


def test_a_non_integer_index_is_refused_naming_array_index_and_type():
    arr = TracedArray("a", np.zeros(4, np.float32), AccessLog())
    with pytest.raises(TypeError, match=r"^read of a\[1\.5\]: .*integers only, not float$"):
        arr[1.5]
    with pytest.raises(TypeError, match=r"^write to a\[0, 1\.0\]: .*integers only, not float$"):
        arr[0, 1.0] = 2.0


def test_out_of_bounds_through_a_row_view_names_the_array():
    arr = TracedArray("grid", np.zeros((2, 3), np.float32), AccessLog())
    with pytest.raises(IndexError, match=r"out-of-bounds read of grid\[1, 3\]"):
        arr[1][3]


def test_writing_a_whole_row_is_refused_naming_the_row():
    arr = TracedArray("out", np.zeros((2, 3), np.float32), AccessLog())
    with pytest.raises(TypeError, match=r"^write to out\[1\]: write one element at a time$"):
        arr[1] = 0.0


# --- tracks: expectations of known-wrong solutions -----------------------------------------------------------


def test_expectation_bounds_all_hold():
    between = tracks.Expectation(((">", 1.0), ("<", 3.0)))
    assert between.matches(2.0) and not between.matches(1.0) and not between.matches(3.0)
    exact = tracks.Expectation((("=", 0.0),))
    assert exact.matches(0.0) and exact.matches(1e-12) and not exact.matches(0.01)
    assert str(between) == "> 1 and < 3"


def test_expected_points_of_a_cell_named_twice_has_both_bounds(tmp_path):
    f = tmp_path / "slow.cu"
    f.write_text("// a slow kernel\n// expect: warptiling_score>1 warptiling_score<3 other=0.5\n")
    got = tracks.expected_points(f)
    assert set(got) == {"warptiling_score", "other"}
    assert got["warptiling_score"].bounds == ((">", 1.0), ("<", 3.0))
    assert got["other"].matches(0.5) and not got["other"].matches(0.0)


def test_expected_points_errors_name_the_file_and_item(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("x = 1\n")
    with pytest.raises(tracks.TrackError, match=r"bad\.py has no 'expect:' line"):
        tracks.expected_points(f)
    f.write_text("# expect: zip_correct=zero\n")
    with pytest.raises(tracks.TrackError, match=r"bad\.py: 'zip_correct=zero' in the expect: line"):
        tracks.expected_points(f)


def test_expected_statuses_are_empty_without_a_status_line(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text("// expect: k_score=0\n")
    assert tracks.expected_statuses(f) == ()
    f.write_text("// expect: k_score=0\n// status: incorrect|oob_write\n")
    assert tracks.expected_statuses(f) == ("incorrect", "oob_write")


def test_graded_kernel_is_the_one_score_cell(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text("// expect: tiled_correct=1 tiled_score<2\n")
    assert tracks.graded_kernel(f) == "tiled"
    f.write_text("// expect: a_score=0 b_score=0\n")
    with pytest.raises(tracks.TrackError, match="exactly one KERNEL_score cell, not 2"):
        tracks.graded_kernel(f)
    f.write_text("// expect: a_correct=0\n")
    with pytest.raises(tracks.TrackError, match="not 0"):
        tracks.graded_kernel(f)


# --- tracks: discovery ---------------------------------------------------------------------------------------


def _track(root: Path, name: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "spec.toml").write_text(body)
    return folder


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A tracks/ folder of four tracks, a hidden and a private folder, and a stray file."""
    root = tmp_path / "tracks"
    _track(root, "b_numba", '[assignment]\nname = "b_numba"\nengine = "numba"\n')
    _track(root, "a_cuda", '[assignment]\nname = "a_cuda"\nengine = "cuda"\n')
    _track(root, "c_numba_gpu", '[assignment]\nname = "c_numba_gpu"\nengine = "numba"\nrequires_gpu = true\n')
    _track(root, "d_cuda_cpu", '[assignment]\nname = "d_cuda_cpu"\nengine = "cuda"\nrequires_gpu = false\n')
    _track(root, ".hidden", "not toml [")
    _track(root, "_private", "not toml [")
    (root / "README").write_text("not a track")
    monkeypatch.setattr(settings, "TRACKS", root)
    return root


def test_all_tracks_are_the_visible_folders_by_name_with_their_gpu_need(course):
    found = tracks.all_tracks(course)
    assert [(t.name, t.folder, t.engine, t.requires_gpu) for t in found] == [
        ("a_cuda", course / "a_cuda", "cuda", True),
        ("b_numba", course / "b_numba", "numba", False),
        ("c_numba_gpu", course / "c_numba_gpu", "numba", True),
        ("d_cuda_cpu", course / "d_cuda_cpu", "cuda", False),
    ]
    assert tracks.all_tracks() == found   # default: settings.TRACKS


def test_find_and_get_a_track(course):
    assert tracks.find("b_numba") == tracks.get("b_numba") == tracks.all_tracks()[1]
    assert tracks.find("nope") is None
    with pytest.raises(tracks.TrackError, match=r"no track 'nope' .*; tracks: a_cuda, b_numba, c_numba_gpu, d_cuda_cpu$"):
        tracks.get("nope")


@pytest.mark.parametrize("body, message", [
    (None, r"a track needs a spec\.toml"),
    ('title = "no assignment table"\n', rf"spec\.toml \[assignment\]: engine must be one of {re.escape(str(tracks.ENGINES))}, "
                                         "got None"),
    ('[assignment]\nname = "bad"\nengine = "opencl"\n', r"engine must be one of .*, got 'opencl'"),
    ('[assignment]\nname = "other"\nengine = "numba"\n', r"spec\.toml \[assignment\]: name must be the folder's name 'bad'"),
])
def test_a_malformed_track_is_refused_saying_why(tmp_path, body, message):
    folder = tmp_path / "bad"
    folder.mkdir()
    if body is not None:
        (folder / "spec.toml").write_text(body)
    with pytest.raises(tracks.TrackError, match=message):
        tracks.all_tracks(tmp_path)


def test_wrong_solutions_are_the_files_in_solutions_wrong_sorted(course):
    track = tracks.get("b_numba")
    assert track.wrong_solutions() == []
    wrong = track.folder / "solutions" / "wrong"
    (wrong / "sub").mkdir(parents=True)
    (wrong / "z.py").write_text("")
    (wrong / "a.py").write_text("")
    (track.folder / "solutions" / "ok.py").write_text("")
    assert track.wrong_solutions() == [wrong / "a.py", wrong / "z.py"]


def test_a_track_without_notebook_py_cannot_build_its_notebook(course):
    with pytest.raises(tracks.TrackError, match=r"b_numba: no notebook\.py$"):
        tracks.get("b_numba").build_notebook()


def test_the_real_tracks_include_both_engines():
    found = {t.name: t for t in tracks.all_tracks()}
    assert {"puzzles", "transpose"} <= set(found)
    assert found["puzzles"].engine == "numba" and found["transpose"].engine == "cuda"
    assert found["transpose"].requires_gpu
