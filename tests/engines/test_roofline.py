"""The roofline engine without a GPU: an answer's form, read from the submitted file by parsing; scoring from a
measurement handed in as data (the child's answer's shape), every part at its edges; the reference and every
known-wrong answer set against a measurement within 2x of the reference's times; the report and the feedback's
figure and table; the notebook; and the refusal to grade without a GPU through the trusted grader's own path.
tests/gpu/test_roofline_gpu.py measures on the GPU and grades through nbgrader."""
from __future__ import annotations

import copy
import logging
import math
import os

import nbformat
import pytest
from nbformat.v4 import new_notebook
from nbgrader.utils import is_grade, is_solution

from graders import autograde, gpu, settings, tracks
from graders.gpu import NeedsGPUWorker
from graders.hidden_tests import HIDDEN_TESTS, RUN_ALONE
from graders.quiz_engine.grade import AnswerFailed
from graders.roofline_engine import child, feedback, grade, scoring
from graders.roofline_engine.notebook import SETUP
from graders.roofline_engine.operations import NOT_WRITTEN, Operation, Tensor, form_problem, timed_function
from graders.sandbox.run import ChildResult
from graders.sandbox.visible import resolved, visible, within
from graders.submission import Submission, SubmissionError
from workshop import staging, submissions
from workshop.cells import read_cells

TRACK = tracks.get("roofline")
OPS = {op.id: op for op in TRACK.problem_module().OPERATIONS}
KEY_MODULE = grade.key("roofline")
KEY, WORK = KEY_MODULE.KEY, KEY_MODULE.WORK
RULES = scoring.Rules.from_spec(TRACK.assignment)
H200 = grade.spec("roofline")["reference_gpu"]
# What the child answers (graders.roofline_engine.child.handle), made up: the H200's clock-derived peaks as its GPU
# records show them, one launch alone, and each operation measured at its reference time times FACTOR[op].
ENVIRONMENT = {"gpu": "NVIDIA H200", "peaks": {"dram": 4814304000000.0, "fp32": 66908160000000.0},
               "l2_bytes": 62914560, "sms": 132}


def launches_us(operations: int) -> float:
    """What n PyTorch operations in a row cost to launch, as the notebook teaches: one alone, then each further
    one in a stream of launches."""
    return H200["launch_alone_us"] + (operations - 1) * H200["launch_in_stream_us"]


def measurement(factor: dict[str, float] | float = 1.0, launch_us: float = 18.0) -> dict:
    factors = factor if isinstance(factor, dict) else dict.fromkeys(OPS, factor)
    return {"launch_overhead_s": launch_us * 1e-6, "environment": ENVIRONMENT,
            "operations": {op: {"median_s": KEY[op]["time_us"] * 1e-6 * factors[op], "samples": 100}
                           for op in OPS}}


# Every other operation measured 1.6x slower than the reference predicts, the rest 1.6x faster: within 2x.
WITHIN_2X = measurement({op: 1.6 if i % 2 else 1 / 1.6 for i, op in enumerate(OPS)})


def graded(op: str, answer: dict, measured: dict = WITHIN_2X) -> scoring.Graded:
    w = scoring.worker(measured, H200)
    return scoring.grade(OPS[op], answer, WORK[op], measured["operations"][op], w, RULES)


def answers_of(path) -> dict[str, dict]:
    """A known-wrong answer file's answers, parsed as the trusted grader parses a submission."""
    nb = new_notebook(cells=[nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade_id": gid, "solution": True, "grade": False, "locked": False, "schema_version": 3}})
        for gid, source in read_cells(path).items()])
    parsed = Submission(nb)
    return {op: parsed.value(op) for op in OPS}


# --- the operations, the key, the notebook ----------------------------------------------------------------


def test_every_operation_is_in_the_key_with_a_regime_and_its_reference_time_from_the_reference_gpu():
    assert set(KEY) == set(WORK) == set(OPS)
    assert {w["regime"] for w in WORK.values()} == {"memory", "compute", "overhead"}
    for op, w in WORK.items():
        assert form_problem(op, KEY[op]) == ""
        bound = {"memory": w["bytes"] / (H200["hbm_tb_s"] * 1e12),
                 "compute": w["flops"] / (H200[f"{OPS[op].peak}_tflops"] * 1e12),
                 "overhead": launches_us(OPS[op].operations) * 1e-6}
        assert max(bound, key=bound.get) == w["regime"], op   # the largest of the three bounds names the regime
        if op != "transpose_sum":   # its strided reads cost 8x their bytes (32-byte sectors, 4 bytes used)
            assert KEY[op]["time_us"] == pytest.approx(bound[w["regime"]] * 1e6, rel=1e-3), op
    assert KEY["transpose_sum"]["time_us"] * 1e-6 > 2 * bound["memory"]


def test_the_key_counts_an_add_a_matmul_and_the_chain_as_the_notebook_says():
    assert WORK["add_huge"]["flops"] / WORK["add_huge"]["bytes"] == pytest.approx(1 / 12)
    assert WORK["matmul_bf16"]["flops"] / WORK["matmul_bf16"]["bytes"] == pytest.approx(4096 / 3)
    assert WORK["chain"]["flops"] / WORK["chain"]["bytes"] == pytest.approx(1 / 8)   # every intermediate written
    # one operation alone, then each further one in a stream of launches: 18 µs, and 18 + 19 x 7 for twenty
    assert (H200["launch_alone_us"], H200["launch_in_stream_us"]) == (18.0, 7.0)
    assert KEY["add_small"]["time_us"] == KEY["sum_small"]["time_us"] == 18.0 and KEY["chain"]["time_us"] == 151.0
    assert OPS["chain"].operations == 20


def test_the_shapes_are_the_ones_whose_operations_reach_their_roof_and_each_operation_says_its_own():
    """benchmarks/results/roofline/roofline-candidates-20261207-023625.json: softmax, layer norm, matrix-vector and
    the thin matmul within 1.2-1.4x of bytes over the bandwidth at these shapes (1.75-1.9x at 8192 wide)."""
    shapes = {op: {name: t.shape for name, t in OPS[op].inputs.items()} for op in OPS}
    assert shapes["softmax"] == {"x": (65536, 1024)}
    assert shapes["layer_norm"] == {"x": (32768, 2048), "w": (2048,), "b": (2048,)}
    assert OPS["layer_norm"].code == "y = F.layer_norm(x, (2048,), w, b)"
    assert shapes["matvec"] == {"W": (16384, 16384), "v": (16384,)}
    assert shapes["matmul_outer"] == {"A": (16384, 64), "B": (64, 16384)}
    assert {t.dtype for t in OPS["matmul_outer"].inputs.values()} == {"bf16"}
    assert shapes["transpose_sum"] == {"x": (8192, 8192)}
    for op, text in (("softmax", "65536 x 1024"), ("layer_norm", "32768 x 2048"), ("matvec", "16384 x 16384"),
                     ("matmul_outer", "16384 x 64 times a 64 x 16384"), ("transpose_sum", "8192 x 8192")):
        assert text in OPS[op].text, op
    assert WORK["matvec"]["bytes"] == 4 * (16384 * 16384 + 2 * 16384)
    assert WORK["matmul_outer"]["bytes"] == 2 * (2 * 16384 * 64 + 16384 * 16384)
    assert WORK["layer_norm"]["bytes"] == 4 * (2 * 32768 * 2048 + 2 * 2048)


H100_ENV = ENVIRONMENT | {"gpu": "NVIDIA H100 80GB HBM3", "peaks": {"dram": 3352320000000.0, "fp32": 66908160000000.0}}


def test_the_keys_model_gives_the_key_on_the_reference_gpu_and_a_workers_own_figures_elsewhere():
    """`key.model` on the reference GPU's figures is the key; `key.figures` of a worker (what the grader translates
    a measurement with, and tests/gpu/test_roofline_gpu.py compares with it) is the worker's own: bandwidth and
    peaks, and both launch figures as its grading child measured them."""
    assert KEY_MODULE.answers(KEY_MODULE.model(H200)) == KEY
    h100 = scoring.worker(WITHIN_2X | {"environment": H100_ENV, "launch_in_stream_s": 6e-6}, H200,
                          grade.spec("roofline")["datasheet_peaks"])
    found = KEY_MODULE.figures(h100)
    assert found == {"name": "NVIDIA H100 80GB HBM3", "hbm_tb_s": 3.35232, "fp32_tflops": 66.90816,
                     "tf32_tflops": 494.7, "bf16_tflops": 989.4, "fp8_tflops": 1978.9, "launch_alone_us": 18.0,
                     "launch_in_stream_us": 6.0}
    on_h100 = KEY_MODULE.answers(KEY_MODULE.model(found))
    assert on_h100["softmax"]["time_us"] == pytest.approx(160.1, abs=0.1)   # the sweep's bytes over the bandwidth
    assert on_h100["matvec"]["time_us"] == pytest.approx(320.3, abs=0.1)
    assert on_h100["matmul_bf16"]["time_us"] == pytest.approx(2 * 4096 ** 3 / 989.4e12 * 1e6, rel=1e-3)
    assert on_h100["chain"]["time_us"] == 18 + 19 * 6   # 20 operations
    assert {op: a | {"time_us": None} for op, a in on_h100.items()} == {op: a | {"time_us": None}
                                                                         for op, a in KEY.items()}
    unknown = KEY_MODULE.figures(scoring.worker(WITHIN_2X | {"environment": H100_ENV | {"gpu": "A GPU"}}, H200))
    assert math.isnan(KEY_MODULE.model(unknown)["matmul_bf16"]["time_us"])   # no tensor-core peak known


def test_a_measurement_is_translated_to_the_reference_gpu_by_the_keys_model_on_both_gpus_figures():
    """`grade.translation`: 1 on a worker of the reference GPU's own figures; on an H100 the memory-bound
    operations' times x 3.35 / 4.8 (its bandwidth over the H200's) and the bf16 matmul's x 989.4 / 989; on a host
    whose launches cost three times the notebook's, the overhead-bound ones' x 1/3. So the reference answers,
    made with the notebook's figures, get full marks on any of them wherever the key's reasoning holds there (its
    model on the worker's figures within 2x of the measurement), and the report shows the translated time."""
    reference_figures = {"environment": ENVIRONMENT | {"peaks": {"dram": 4.8e12, "fp32": 67e12}},
                         "launch_overhead_s": 18e-6, "launch_in_stream_s": 7e-6}
    same = scoring.worker(WITHIN_2X | reference_figures, H200)
    assert {op: grade.translation("roofline", op, same) for op in OPS} == pytest.approx(dict.fromkeys(OPS, 1.0))
    sheets = grade.spec("roofline")["datasheet_peaks"]
    slow = {"environment": H100_ENV, "launch_overhead_s": 54e-6, "launch_in_stream_s": 21e-6}
    h100 = scoring.worker(WITHIN_2X | slow, H200, sheets)
    scale = {op: grade.translation("roofline", op, h100) for op in OPS}
    assert scale["softmax"] == scale["transpose_sum"] == pytest.approx(3.35232 / 4.8)
    assert scale["matmul_bf16"] == pytest.approx(989.4 / 989)
    assert scale["add_small"] == pytest.approx(1 / 3) and scale["chain"] == pytest.approx(1 / 3)
    on_h100 = KEY_MODULE.model(KEY_MODULE.figures(h100))
    for factor in (1.9, 1 / 1.9):   # the key's reasoning within 2x on this worker
        measured = {op: {"median_s": on_h100[op]["time_us"] * 1e-6 * factor, "samples": 100} for op in OPS}
        for op in OPS:
            g = scoring.grade(OPS[op], KEY[op], WORK[op], measured[op], h100, RULES, scale=scale[op])
            assert g.points == 4.0 and g.ratio == pytest.approx(max(factor, 1 / factor), rel=1e-3), (op, factor)
            assert g.translated_s == pytest.approx(KEY[op]["time_us"] * 1e-6 * factor, rel=1e-3)
        untranslated = scoring.grade(OPS["add_small"], KEY["add_small"], WORK["add_small"], measured["add_small"],
                                     h100, RULES)
        assert untranslated.ratio == pytest.approx(3 * factor, rel=1e-3)   # the host's slow launches counted
    g = scoring.grade(OPS["softmax"], KEY["softmax"], WORK["softmax"], {"median_s": 237.2e-6, "samples": 80}, h100,
                      RULES, scale=scale["softmax"])
    line = scoring.report(OPS["softmax"], g, h100, RULES).splitlines()[1]
    assert line.startswith("  measured on the worker (NVIDIA H100 80GB HBM3): 237.2 µs (median of 80 runs), 165.7 µs "
                           "on the reference GPU (x 0.698: the roofline's time there over its time with this "
                           "worker's figures); you predicted 111.8 µs, 1.48x under (2 / 2 points"), line
    assert g.as_dict()["translated_s"] == pytest.approx(165.7e-6, abs=0.1e-6)
    unknown = scoring.worker(WITHIN_2X | {"environment": H100_ENV | {"gpu": "A GPU"}}, H200)
    assert grade.translation("roofline", "matmul_bf16", unknown) == 1.0   # the key cannot say: not translated


def test_every_operations_code_is_a_function_of_its_inputs():
    for op in OPS.values():
        run = timed_function(op, {})
        assert run.__code__.co_varnames[:run.__code__.co_argcount] == tuple(op.inputs), op.id


def test_the_notebook_has_a_solution_and_a_graded_cell_per_operation_holding_the_reference():
    nb = TRACK.build_notebook()
    cells = {c.metadata.nbgrader["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}
    assert cells["setup"].source == SETUP
    for op in OPS:
        assert is_solution(cells[op]) and f"{op} = {KEY[op]!r}" in cells[op].source
        assert cells[op].source.startswith(f'{op} = {{"regime": None, "intensity": None, "time_us": None}}\n')
        assert is_grade(cells[f"{op}_score"]) and cells[f"{op}_score"].metadata.nbgrader["points"] == 4
        assert f"predict('roofline', {op!r}, {op})" in cells[f"{op}_score"].source
    assert "predict" in RUN_ALONE and HIDDEN_TESTS["predict"].__module__ == "graders.roofline_engine.grade"


def test_the_notebook_gives_both_launch_figures_and_how_to_use_them():
    text = "\n".join(c.source for c in TRACK.build_notebook().cells if c.cell_type == "markdown")
    assert "| LAUNCH_ALONE: one PyTorch operation alone, on an idle GPU | about 18 µs |" in text
    assert "| LAUNCH_IN_STREAM: each further operation in a stream of launches | about 7 µs |" in text
    assert text.count("LAUNCH_ALONE + (n - 1) x LAUNCH_IN_STREAM") == 2   # the introduction and how to count
    assert "to be re-measured on the H200" in text and H200["launch_record"] in text


def test_each_subject_of_the_child_runs_its_own_operation_on_inputs_drawn_afresh(monkeypatch):
    """The grading child's subjects (`child.subjects`) on CPU tensors: each runs its operation's code on its own
    inputs, which its ``prepare`` redraws; the launch subject adds one to one element."""
    import torch
    seen: list = []
    monkeypatch.setattr(torch, "seen", seen, raising=False)   # what the operations' code below hands out
    ops = [Operation("double", "", "torch.seen.append(x * 2)", {"x": Tensor((3,))}),
           Operation("mm", "", "torch.seen.append(A @ B)", {"A": Tensor((2, 3), "bf16"), "B": Tensor((3, 2), "bf16")})]
    found = child.subjects(ops, torch, device="cpu")
    assert list(found) == ["double", "mm", child.LAUNCH, child.STREAM]
    for name in ("double", "mm", "double"):
        found[name].prepare()
        found[name].run()
    assert seen[0].shape == (3,) and seen[1].shape == (2, 2) and seen[1].dtype == torch.bfloat16
    assert seen[2].shape == (3,) and not torch.equal(seen[2], seen[0])   # fresh inputs
    found[child.LAUNCH].prepare()
    found[child.LAUNCH].run()
    found[child.STREAM].run()
    assert len(seen) == 3
    assert child.launch_in_stream_s(18e-6, 18e-6 + 19 * 7e-6) == pytest.approx(7e-6)   # beyond the first, per launch
    assert child.launch_in_stream_s(18e-6, 17e-6) == 0.0


def test_the_worker_takes_both_launch_figures_from_the_measurement():
    w = scoring.worker(WITHIN_2X | {"launch_overhead_s": 55e-6, "launch_in_stream_s": 21e-6}, H200)
    assert (w.launch_s, w.stream_s, w.overhead_s(20)) == (55e-6, 21e-6, pytest.approx(55e-6 + 19 * 21e-6))
    assert scoring.worker(WITHIN_2X, H200).stream_s == 7e-6   # a measurement without it: the reference's


def test_the_key_is_on_a_worker_and_never_in_the_student_kit_or_the_grading_childs_sandbox():
    key = f"tracks/roofline/{grade.KEY_FILE}"
    assert key in {p.as_posix() for p in staging.worker_files()}
    assert key not in {p.as_posix() for p in staging.student_files()}
    binds = [resolved(host) for host, _ in visible(gpu=True, courses=[settings.ROOT], env=os.environ).binds]
    assert any(host == settings.ROOT / "tracks/roofline/problem.py" for host in binds)   # the child's operations
    assert not any(host and within(settings.ROOT.resolve() / key, host) for host in binds)


# --- an answer's form, parsed -----------------------------------------------------------------------------


@pytest.mark.parametrize("answer, why", [
    ({"regime": None, "intensity": None, "time_us": None}, f"{NOT_WRITTEN}: replace None with your regime, "
                                                           "intensity, time_us"),
    ({"regime": "memory", "intensity": 0.25, "time_us": None}, f"{NOT_WRITTEN}: replace None with your time_us"),
    ({"regime": "memory", "intensity": 0.25}, "must be a dict"),
    ({"regime": "memory", "intensity": 0.25, "time_us": 1.0, "why": "x"}, "must be a dict"),
    ("memory", "must be a dict"),
    ({"regime": "Memory", "intensity": 0.25, "time_us": 1.0}, "regime must be one of 'memory', 'compute', 'overhead'"),
    ({"regime": "memory", "intensity": "0.25", "time_us": 1.0}, "intensity must be a positive number"),
    ({"regime": "memory", "intensity": True, "time_us": 1.0}, "intensity must be a positive number"),
    ({"regime": "memory", "intensity": 0.25, "time_us": 0}, "time_us must be a positive number"),
    ({"regime": "memory", "intensity": 0.25, "time_us": -3.0}, "time_us must be a positive number"),
    ({"regime": "memory", "intensity": math.inf, "time_us": 1.0}, "intensity must be a positive number"),
])
def test_an_answer_of_the_wrong_form_fails_its_check_saying_why(answer, why, capsys):
    assert why in form_problem("sum_huge", answer)
    with pytest.raises(AnswerFailed, match=f"^sum_huge: .*{why[:20]}"):
        grade.check_prediction("roofline", "sum_huge", answer)


def test_the_check_passes_the_reference_and_says_it_is_graded_on_the_worker(capsys):
    grade.check_prediction("roofline", "matvec", KEY["matvec"])
    assert capsys.readouterr().out.startswith("✓ matvec: answered {'regime': 'memory'")


def test_answers_are_read_from_the_solution_cells_as_literals_and_an_expression_is_refused():
    nb = submissions.fill(nbformat.read(str(TRACK.notebook_path), as_version=4),
                          {"add_small": 'add_small = {"regime": "overhead", "intensity": 1 / 12, "time_us": 7}',
                           "sum_small": 'sum_small = {"regime": "overhead", "intensity": 0.25, "time_us": 7}'})
    parsed = Submission(nb)
    assert parsed.value("sum_small") == {"regime": "overhead", "intensity": 0.25, "time_us": 7}
    with pytest.raises(SubmissionError, match="add_small must be a literal"):
        parsed.value("add_small")


# --- scoring ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio, share", [(1.0, 1.0), (2.0, 1.0), (2 ** 1.5, 0.5), (4.0, 0.0), (10.0, 0.0)])
def test_time_points_are_full_within_2x_either_way_none_beyond_4x_and_linear_in_log_between(ratio, share):
    for predicted, measured in ((ratio, 1.0), (1.0, ratio)):
        found_ratio, found_share = scoring.time_share(predicted * 1e-6, measured * 1e-6, RULES)
        assert found_ratio == pytest.approx(ratio) and found_share == pytest.approx(share, abs=1e-12)


def test_intensity_is_right_within_10_percent_and_not_in_other_units():
    right = WORK["softmax"]["flops"] / WORK["softmax"]["bytes"]
    answer = dict(KEY["softmax"])
    for value, points in ((right * 1.099, 1.0), (right * 0.901, 1.0), (right * 1.11, 0.0), (right / 8, 0.0),
                          (5.0, 0.0)):   # per bit; per element
        assert graded("softmax", answer | {"intensity": value}).parts["intensity"] == points, value


def test_the_reference_scores_full_marks_against_a_measurement_within_2x():
    for op in OPS:
        g = graded(op, KEY[op])
        assert g.parts == {"regime": 1.0, "intensity": 1.0, "time": 2.0} and g.points == 4.0, op
        assert g.shown == g.regime, op   # at the reference's times, the measurement shows the key's regime


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.stem)
def test_each_known_wrong_answer_set_scores_its_expected_points(path):
    answers = answers_of(path)
    expected = tracks.expected_points(path)
    assert set(expected) == {f"{op}_score" for op in OPS}
    for op, answer in answers.items():
        points = graded(op, answer).points
        assert expected[f"{op}_score"].matches(points), (op, points, str(expected[f"{op}_score"]))


def test_the_times_10x_off_score_no_time_points_whatever_the_measurement_within_2x_of_the_reference():
    answers = answers_of(TRACK.solutions / "wrong" / "times_10x.py")
    for factor in (0.5, 1.0, 2.0):
        for op, answer in answers.items():
            assert graded(op, answer, measurement(factor)).parts["time"] == 0, (op, factor)


def test_the_worker_reads_the_gpus_peaks_and_the_datasheets_tensor_rates_only_for_gpus_the_spec_names():
    h200 = scoring.worker(WITHIN_2X, H200)
    assert h200.bandwidth == 4814304000000.0 and h200.peaks["fp32"] == 66908160000000.0
    assert h200.peaks["bf16"] == 989e12 and h200.launch_s == 18e-6
    other = scoring.worker(WITHIN_2X | {"environment": ENVIRONMENT | {"gpu": "NVIDIA A100-SXM4-80GB"}}, H200)
    assert set(other.peaks) == {"fp32"}
    g = scoring.grade(OPS["matmul_bf16"], KEY["matmul_bf16"], WORK["matmul_bf16"],
                      WITHIN_2X["operations"]["matmul_bf16"], other, RULES)
    assert "compute" not in g.shares
    assert "peak is not known to the grader" in scoring.shows(OPS["matmul_bf16"], g, other)
    sheets = grade.spec("roofline")["datasheet_peaks"]
    h100 = scoring.worker(WITHIN_2X | {"environment": ENVIRONMENT | {"gpu": "NVIDIA H100 80GB HBM3"}}, H200, sheets)
    assert h100.peaks == {"fp32": h200.peaks["fp32"], "tf32": 494.7e12, "bf16": 989.4e12, "fp8": 1978.9e12}
    g = scoring.grade(OPS["matmul_bf16"], KEY["matmul_bf16"], WORK["matmul_bf16"],
                      WITHIN_2X["operations"]["matmul_bf16"], h100, RULES)
    assert "compute" in g.shares


def test_fractions_of_a_measurement():
    op = Operation("x", "x", "y = x + x", {"x": Tensor((1000,))}, operations=2)
    w = scoring.Worker("GPU", 1e12, {"fp32": 1e13}, 0, 0, 6e-6, 4e-6)   # two launches: 6 µs alone + 4 µs more
    shares = scoring.fractions(op, {"flops": 1e6, "bytes": 1e7}, 20e-6, w)
    assert shares == pytest.approx({"memory": 0.5, "compute": 0.005, "overhead": 0.5})
    assert scoring.shown(scoring.fractions(op, {"flops": 1e6, "bytes": 2e7}, 20e-6, w)) == "memory"
    assert scoring.shown(scoring.fractions(op, {"flops": 1e6, "bytes": 1e6}, 20e-6, w)) == "overhead"
    assert scoring.shown(scoring.fractions(op, {"flops": 1.5e8, "bytes": 1e6}, 20e-6, w)) == "compute"


# --- the report and the feedback ------------------------------------------------------------------------


def test_the_report_states_the_measurement_and_what_it_shows_for_a_wrong_regime():
    worker = scoring.worker(WITHIN_2X, H200)
    wrong = KEY["add_huge"] | {"regime": "compute", "intensity": 1.0}
    text = scoring.report(OPS["add_huge"], graded("add_huge", wrong), worker, RULES)
    lines = text.splitlines()
    assert lines[0] == "add_huge: 2 / 4 points"
    assert "measured on the worker (NVIDIA H200): 536.8 µs (median of 100 runs); you predicted 335.5 µs, 1.60x " \
           "under (2 / 2 points: full within 2x, none beyond 4x)" in lines[1]
    assert lines[2].startswith("  regime: ✗ you said compute; the measurement shows memory: 3 TB/s moved, 62% of the "
                               "4.81 TB/s memory bandwidth; ")
    assert "of the FP32 peak (66.9 TFLOP/s); 1 launch, 18.0 µs: 3% of its time" in lines[2]
    assert lines[3].startswith("  intensity: ✗ 1 FLOP/byte is not this operation's (right within 10%)")
    right = scoring.report(OPS["chain"], graded("chain", KEY["chain"]), worker, RULES).splitlines()
    assert right[2:] == ["  regime: ✓ overhead", "  intensity: ✓ 0.125 FLOP/byte"]
    chain = scoring.report(OPS["chain"], graded("chain", KEY["chain"] | {"regime": "memory"}), worker, RULES)
    assert "20 launches, 18.0 µs + 19 x 7.0 µs: " in chain   # the first alone, the rest in a stream


def test_the_feedback_adds_the_roofline_figure_and_the_table_after_the_last_operation():
    worker = scoring.worker(WITHIN_2X, H200)
    nb = TRACK.build_notebook()
    scored = [c for c in nb.cells if is_grade(c)]
    for cell in scored:
        op = cell.metadata.nbgrader["grade_id"].removesuffix("_score")
        answer = KEY[op] | ({"time_us": KEY[op]["time_us"] * 10} if op == "softmax" else {})
        result = {"test": op, "roofline": graded(op, answer).as_dict(), "worker": worker.as_dict()}
        cell.metadata[autograde.RESULTS_KEY] = {"results": [result]}
        cell.outputs = []
    nb, _ = feedback.RooflineFeedback().preprocess(nb, {})
    assert [len(c.outputs) for c in scored] == [0] * (len(scored) - 1) + [2]
    figure, table = scored[-1].outputs
    assert base64_png(figure.data["image/png"]).startswith(b"\x89PNG")
    html = table.data["text/html"]
    assert html.count("<tr>") == len(OPS) + 1 and "workshop-roofline" in html
    assert "<th style='text-align:left'>measured</th><th style='text-align:left'>on the reference GPU</th>" in html
    assert ("on NVIDIA H200 (memory 4.81 TB/s, FP32 66.9 TFLOP/s, TF32 tensor cores 495 TFLOP/s, bf16 tensor cores "
            "989 TFLOP/s, fp8 tensor cores 1,979 TFLOP/s, L2 60 MiB, 132 SMs, a launch alone 18.0 µs, 7.0 µs more for "
            "each in a stream)") in html
    softmax = html[html.index("<td style='text-align:left'>softmax</td>"):]
    assert softmax.split("</tr>")[0].endswith("16.00x</td><td style='text-align:left'>2 / 4</td>")   # 10 x 1.6
    other = TRACK.build_notebook()   # a notebook without graded predictions is left as it is
    before = copy.deepcopy(other)
    assert feedback.RooflineFeedback().preprocess(other, {})[0] == before


def base64_png(data: str) -> bytes:
    import base64
    return base64.b64decode(data)


# --- the measurement's child, from the parent's side --------------------------------------------------------


def test_the_measurement_is_made_once_per_process_and_a_failed_one_is_not_kept(monkeypatch):
    """`grade.worker_measurement` with the child's results handed in (`graders.sandbox.run.ChildResult`): a child that
    died or whose handler raised is the grader's failure, said so, and tried again on the next call; an answer is
    kept for every later call of the process."""
    answers = iter([ChildResult("crashed", message="killed by signal 9"),
                    ChildResult("ok", answer={"error": "RuntimeError: CUDA error: out of memory"}),
                    ChildResult("ok", answer=WITHIN_2X)])
    requests = []
    monkeypatch.setattr(grade, "run_child", lambda handler, request, **kw: requests.append((handler, request, kw))
                        or next(answers))
    monkeypatch.setattr(grade, "_measured", {})
    monkeypatch.delenv("WORKSHOP_PERF_BUDGET_S", raising=False)   # the spec's budget
    with pytest.raises(grade.MeasurementFailed, match="the grader failed: its measuring process died: killed by"):
        grade.worker_measurement("roofline")
    with pytest.raises(grade.MeasurementFailed, match="the grader failed: RuntimeError: CUDA error: out of memory"):
        grade.worker_measurement("roofline")
    assert grade.worker_measurement("roofline") is grade.worker_measurement("roofline") is WITHIN_2X
    assert len(requests) == 3
    handler, request, options = requests[-1]
    assert handler == grade.CHILD and request == {"assignment": "roofline", "budget_s": 20.0}
    assert options["gpu"] and options["timeout_s"] == 20.0 + grade.STARTUP_S


# --- no GPU --------------------------------------------------------------------------------------------------


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    gpu.detect_gpu.cache_clear()
    yield
    gpu.detect_gpu.cache_clear()


def test_without_a_gpu_the_trusted_grader_stops_the_submission_and_autograde_refuses_to_start(no_gpu):
    """The grading entry point (`graders.autograde._Grading`, on the filled source notebook): the first prediction's
    hidden test raises NeedsGPUWorker, which stops the submission (nothing recorded); `nbgrader autograde` refuses
    before it reads a submission (`cannot_grade_here`; tests/e2e/test_cuda_tracks_nbgrader.py runs that through
    nbgrader for a GPU-only track)."""
    nb = submissions.fill(nbformat.read(str(TRACK.notebook_path), as_version=4),
                          {op: f"{op} = {KEY[op]!r}" for op in OPS})
    grading = autograde._Grading(autograde.graded_cells(nb), Submission(nb), 2, logging.getLogger("roofline"),
                                 time_limit=60, student="alice")
    with pytest.raises(NeedsGPUWorker, match="Grading roofline needs a GPU worker"):
        grading.finish()
    assert grade._measured == {}
    assert autograde.cannot_grade_here(["roofline"]).startswith("NeedsGPUWorker: Autograding roofline needs a GPU")
