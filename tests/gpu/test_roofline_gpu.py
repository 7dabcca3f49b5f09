"""The roofline track on a real GPU: the grading child measures every operation; each lands in the regime the key
says (the largest of its achieved shares: bandwidth, the peak of its arithmetic, launch overhead); three
measurements, each in a fresh child, agree within 5% per operation as graded (translated to the reference GPU:
`grade.translation`), so that a prediction within 2x is graded the same every time; the key's times, as its model
(``key.model``) gives them with this worker's own figures, are within 2x of the measurement; and nbgrader grades
the reference full marks, the untouched stub 0 and each known-wrong answer set exactly its ``expect:`` points,
with the roofline figure in the feedback. Records the measurements, their spread measured and as graded, the two
launch figures (the spec's are an H100's, to be set from an H200's) and the key's times on this worker with their
ratios to the measurement under benchmarks/results/roofline/.

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_roofline_gpu.py -x -q -s`` (``-s`` shows the
measurements and the reports). The nbgrader submissions measure with ``WORKSHOP_PERF_BUDGET_S`` (default here
5 s) each; the three measurements with the spec's budget.
"""
from __future__ import annotations

import os

import pytest

from gradebook.summary import cell_scores
from graders import tracks
from graders.roofline_engine import grade, scoring
from workshop.cells import read_cells
from workshop.course import Autograding, Course, nbgrader, stderr_text
from workshop.records import write_gpu_record

pytestmark = pytest.mark.gpu

TRACK = tracks.get("roofline")
OPS = {op.id: op for op in TRACK.problem_module().OPERATIONS}
KEY_MODULE = grade.key("roofline")
KEY, WORK = KEY_MODULE.KEY, KEY_MODULE.WORK
REFERENCE_GPU = grade.spec("roofline")["reference_gpu"]
DATASHEETS = grade.spec("roofline").get("datasheet_peaks")
MEASUREMENTS = 3
SPREAD = 0.05


def on_this_worker(measurement: dict) -> tuple[dict, dict[str, float]]:
    """The figures of the worker that made ``measurement`` (`key.figures`: its bandwidth and FP32 peak from its
    clocks, its tensor-core peaks as `scoring.worker` gives them, its two launch figures as measured) and the key's
    time of each operation there (µs), as `key.model` derives them."""
    figures = KEY_MODULE.figures(scoring.worker(measurement, REFERENCE_GPU, DATASHEETS))
    return figures, {op: a["time_us"] for op, a in KEY_MODULE.answers(KEY_MODULE.model(figures)).items()}


def as_graded(measurement: dict) -> dict[str, float]:
    """Each operation's measurement (µs) as a prediction is graded against it: translated to the reference GPU with
    that measurement's own worker figures (`grade.translation`)."""
    w = scoring.worker(measurement, REFERENCE_GPU, DATASHEETS)
    return {op: measurement["operations"][op]["median_s"] * 1e6 * grade.translation("roofline", op, w) for op in OPS}


@pytest.fixture(scope="module")
def measured() -> list[dict]:
    """Three measurements of the track, each by a fresh grading child; recorded, with the key's times on this
    worker's figures and their ratios to each measurement."""
    found = [grade.measure("roofline") for _ in range(MEASUREMENTS)]
    rows = {op: [m["operations"][op]["median_s"] * 1e6 for m in found] for op in OPS}
    graded = [as_graded(m) for m in found]
    launch = [m["launch_overhead_s"] * 1e6 for m in found]
    stream = [m["launch_in_stream_s"] * 1e6 for m in found]
    figures, key_us = on_this_worker(found[0])
    print(f"\na launch alone: {', '.join(f'{t:.2f}' for t in launch)} µs; each further one in a stream: "
          f"{', '.join(f'{t:.2f}' for t in stream)} µs")
    for op, times in rows.items():
        print(f"{op:>14}: {', '.join(f'{t:,.1f}' for t in times)} µs; the key's on this worker {key_us[op]:,.4g} "
              f"µs (on the reference GPU {KEY[op]['time_us']:,.4g}); as graded "
              f"{', '.join(f'{g[op]:,.1f}' for g in graded)} µs")
    write_gpu_record("roofline-gpu", "the roofline track's operations measured by its grading child, three times",
                     {"launch_overhead_us": launch, "launch_in_stream_us": stream, "operations_us": rows,
                      "spread": {op: max(t) / min(t) - 1 for op, t in rows.items()},
                      "graded_us": {op: [g[op] for g in graded] for op in OPS},
                      "graded_spread": {op: max(g[op] for g in graded) / min(g[op] for g in graded) - 1 for op in OPS},
                      "environment": found[0]["environment"], "key_figures": figures, "key_us": key_us,
                      "key_over_measured": {op: [key_us[op] / t for t in times] for op, times in rows.items()},
                      "reference_key_us": {op: KEY[op]["time_us"] for op in OPS}}, track="roofline")
    return found


def test_the_child_measures_every_operation_and_the_launch_overhead(measured):
    for m in measured:
        assert set(m["operations"]) == set(OPS)
        assert all(s["median_s"] > 0 and s["samples"] >= 50 for s in m["operations"].values())
        assert 1e-6 < m["launch_overhead_s"] < 1e-4 and 0 < m["launch_in_stream_s"] < m["launch_overhead_s"]
        assert m["environment"]["peaks"]["dram"] > 0


def test_every_operation_lands_in_the_regime_the_key_says(measured):
    w = scoring.worker(measured[0], REFERENCE_GPU, DATASHEETS)
    shown = {}
    for op in OPS:
        shares = scoring.fractions(OPS[op], WORK[op], measured[0]["operations"][op]["median_s"], w)
        shown[op] = (scoring.shown(shares), {k: round(v, 3) for k, v in shares.items()})
        print(f"{op:>14}: {shown[op]}")
    assert {op: s for op, (s, _) in shown.items()} == {op: w["regime"] for op, w in WORK.items()}


def test_three_measurements_as_graded_agree_within_5_percent_per_operation(measured):
    """As graded: each measurement translated to the reference GPU by its own worker figures, launch figures
    included, which move with the host's launch speed as the short operations do."""
    graded = [as_graded(m) for m in measured]
    times = {op: [g[op] for g in graded] for op in OPS}
    spread = {op: max(t) / min(t) - 1 for op, t in times.items()}
    assert {op: s for op, s in spread.items() if s > SPREAD} == {}, spread


def test_the_keys_times_on_this_workers_figures_are_within_2x_of_the_measurement(measured):
    """The key's reasoning, not the reference GPU's datasheet: `key.model` evaluated with this worker's own figures
    (`on_this_worker`: bandwidth and FP32 peak from the measurement's environment, tensor-core peaks as
    `scoring.worker` gives them, the spec's two launch figures) is within 2x of each operation's measurement, on
    any worker; on the reference GPU that is KEY itself, the times the reference answers hold. A GPU whose
    tensor-core peaks the spec does not name gets NaN for those operations, and fails here."""
    _, key_us = on_this_worker(measured[0])
    ratios = {op: key_us[op] * 1e-6 / measured[0]["operations"][op]["median_s"] for op in OPS}
    assert {op: r for op, r in ratios.items() if not 0.5 <= r <= 2} == {}, ratios


@pytest.fixture(scope="module")
def grading(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "5")
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        grading = Autograding(Course(tmp_path_factory.mktemp("roofline-gpu-course"), "roofline"))
        yield grading
        write_gpu_record("roofline-track-nbgrader-gpu", "nbgrader autograde of the roofline track: reference, "
                         "stub and its known-wrong answer sets", {"seconds_per_submission": grading.seconds,
                                                                  "scores": grading.scores},
                         dists=("nbgrader",), folder="roofline")


def test_nbgrader_grades_the_reference_full_marks_and_the_feedback_draws_the_roofline(grading):
    scores = grading.grade("reference", {op: f"{op} = {KEY[op]!r}" for op in OPS})
    for grade_id, outputs in grading.test_cell_outputs("reference").items():
        print(f"--- {grade_id}\n" + "".join(o.get("text", "") for o in outputs))
        assert not stderr_text(outputs), (grade_id, stderr_text(outputs))
    table = cell_scores(f"sqlite:///{grading.course.root / 'gradebook.db'}", "roofline")
    rows = table[table.student == "reference"]
    assert scores == dict(zip(rows.cell, rows.max_score)) and sum(scores.values()) == 4 * len(OPS)
    nbgrader(grading.course.root, "generate_feedback", "roofline", "--student", "reference")
    page = (grading.course.root / "feedback" / "reference" / "roofline" / "roofline.html").read_text()
    assert page.count('src="data:image/png;base64,') == 1 and "workshop-roofline" in page


def test_nbgrader_grades_the_stub_0_with_an_error_in_each_graded_cell(grading):
    scores = grading.grade("stub", {})
    assert scores and not any(scores.values()), scores
    for grade_id, outputs in grading.test_cell_outputs("stub").items():
        assert any(o.get("output_type") == "error" and "not written yet" in o.get("evalue", "")
                   for o in outputs), (grade_id, outputs)


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.stem)
def test_nbgrader_grades_each_known_wrong_answer_set_its_expected_points(grading, path):
    scores = grading.grade(path.stem, read_cells(path))
    missed = {grade_id: (scores[grade_id], str(expected))
              for grade_id, expected in tracks.expected_points(path).items() if not expected.matches(scores[grade_id])}
    assert not missed, missed
