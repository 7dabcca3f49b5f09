"""Every CUDA track autograded by nbgrader on a real GPU: the reference gets full marks, the untouched stub 0,
and each known-wrong solution exactly the points on its ``expect:`` line (handed in together where they
replace different kernels). Records seconds per submission and the scores under benchmarks/results/.
"""
from __future__ import annotations

import os

import pytest

from graders import tracks
from workshop.course import Autograding, Course, stderr_text
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers

pytestmark = pytest.mark.gpu
CUDA_TRACKS = [t for t in tracks.all_tracks() if t.engine == "cuda"]


def wrong_submissions(track: tracks.Track) -> list[dict]:
    """The known-wrong solutions grouped so that no two in one submission replace the same kernel."""
    groups: list[dict] = []
    for path in track.wrong_solutions():
        kernel = tracks.graded_kernel(path)
        group = next((g for g in groups if kernel not in g), None)
        if group is None:
            groups.append(group := {})
        group[kernel] = path
    return groups


@pytest.mark.parametrize("track", CUDA_TRACKS, ids=lambda t: t.name)
def test_reference_stub_and_known_wrong(track, tmp_path):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
        grading = Autograding(Course(tmp_path, track.name))
        reference = grading.grade("reference", cuda_answers(track.name))
        stub = grading.grade("stub", {})
        misses = {}
        for i, group in enumerate(wrong_submissions(track)):
            scores = grading.grade(f"wrong{i}", cuda_answers(track.name, {k: p.read_text() for k, p in group.items()}))
            for path in group.values():
                for grade_id, expected in tracks.expected_points(path).items():
                    if not expected.matches(scores[grade_id]):
                        misses[f"{path.name}: {grade_id}"] = scores[grade_id]
        write_gpu_record(
            f"{track.name}-track-nbgrader-gpu", f"nbgrader autograde of the {track.name} track: reference, stub and "
            "its known-wrong solutions", {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
                                           "seconds_per_submission": grading.seconds, "scores": grading.scores,
                                           "expectations_missed": misses}, dists=("nbgrader",))
    outputs = grading.test_cell_outputs("reference")
    assert not any(stderr_text(o) for o in outputs.values())
    assert reference and reference == max_points(grading, "reference"), reference
    assert stub.keys() == reference.keys() and sum(stub.values()) == 0, stub
    assert not misses, misses


def max_points(grading: Autograding, student: str) -> dict[str, float]:
    """Each graded cell's maximum, from nbgrader's gradebook."""
    from gradebook.summary import cell_scores
    table = cell_scores(f"sqlite:///{grading.course.root / 'gradebook.db'}", grading.course.assignment)
    rows = table[table.student == student]
    return dict(zip(rows.cell, rows.max_score))
