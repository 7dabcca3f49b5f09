"""The serving track on a real GPU (the H200 it is written for).

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_serving_gpu.py -x -q -s`` (``-s`` shows the table).
Nothing here has run on a GPU in the change that wrote it: the kernels compiled for sm_90 and ran in the CPU preview
on a machine without one (tests/tracks/test_serving.py), so these tests are the first to run them.

- every reference graded as a submission is (sandboxed child, its baseline timed in the same child): correct at every
  check shape, before and after timing; its time, throughput, ratio to the baseline and fraction of the memory's peak
  written to ``benchmarks/results/serving/serving-<date-time>.json`` (the record ``workshop targets serving``
  reads), with, timed here by CUDA events outside the grading child, a device-to-device copy of the step's bytes (the
  roofline as a copy reaches it), ``torch.compile``'s fused kernel for the two fusions and the fp16 GEMV of the
  dequantised weights for W4A16;
- the issue's goals: the fusions and paged decode at 85% of the copy or more, W4A16 at batch 1 at 80%, the fusions
  faster than ``torch.compile``'s kernel, the FP8 GEMM's fp8 wgmma reference at 70% of ``torch._scaled_mm``;
- ``torch._scaled_mm`` itself (the FP8 GEMM's baseline, cuBLASLt without fast accumulation) within the kind's
  tolerance at every check shape: Hopper's fp8 tensor cores accumulate with about 13 bits of mantissa, cuBLASLt
  promotes into fp32 every 128 products and the reference every 64 (the emulation in tests/tracks/test_serving.py
  puts both within the 2e-4 relative Frobenius error); its errors are in the record;
- every known-wrong solution ends in a status of its ``status:`` line with its ``expect:`` points;
- nbgrader's grading of the notebook: the reference (every prefill-against-decode answer and every correctness
  point; full marks once the targets are measured), the untouched stub (0, an error in each graded cell) and the
  known-wrong solutions (their ``expect:`` points), recorded in
  ``benchmarks/results/serving/serving-nbgrader-gpu-<date-time>.json``.
"""
import os

import pytest
import torch

from graders import tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from workshop import records

pytestmark = pytest.mark.gpu

SPEC = load_spec("serving")
TRACK = tracks.get("serving")
SERVING = TRACK.problem_module()
BUDGET_S = float(os.environ.get("SERVING_TEST_BUDGET_S", "2.0"))   # per grading here
WRONG = TRACK.wrong_solutions()
GOALS = {"rmsnorm": 0.85, "swiglu": 0.85, "paged_decode": 0.85, "w4a16_b1": 0.80}   # of the copy's bandwidth
FP8_GOAL = 0.70   # of torch._scaled_mm's FLOP/s
EVENT_RUNS = 20


def grade(kernel_id: str, source: str) -> dict:
    result = grade_kernel("serving", kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result))
    return result.as_dict()


def event_us(run) -> float:
    """The median time of ``run`` over EVENT_RUNS launches after two warm-ups, by CUDA events."""
    for _ in range(2):
        run()
    times = []
    for _ in range(EVENT_RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


def copy_gbs(nbytes: int) -> float:
    """A device-to-device copy of ``nbytes`` (half read, half written): the bandwidth a copy reaches."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / event_us(lambda: dst.copy_(src)) / 1e3


def others_us(kernel_id: str) -> dict:
    """What the issue compares each step with beyond its graded baseline, at the step's timed shape."""
    kernel = SPEC.kernel(kernel_id)
    inputs = problem(kernel.kind).make_inputs(kernel.perf_shape, torch.Generator(device="cuda").manual_seed(0))
    if kernel.kind == "rmsnorm_residual":
        def fused(x, r, w):
            h = x + r
            hf = h.float()
            return h, w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + SERVING.EPS)).to(h.dtype)
        compiled = torch.compile(fused)
        return {"torch_compile_us": event_us(lambda: compiled(*inputs))}
    if kernel.kind == "swiglu":
        d = kernel.perf_shape[1]
        compiled = torch.compile(lambda x: torch.nn.functional.silu(x[:, :d]) * x[:, d:])
        return {"torch_compile_us": event_us(lambda: compiled(*inputs))}
    if kernel.kind == "w4a16_gemv":
        w, scales, x = inputs
        weights = SERVING.dequantise_int4(w, scales).half()
        return {"fp16_gemv_us": event_us(lambda: x @ weights.T)}
    return {}


def scaled_mm_accuracy(kernel) -> dict:
    """torch._scaled_mm's result at each check shape against the kind's reference: its verdict ('' within the
    tolerance) and errors (the largest share of an element's bound, the relative Frobenius error)."""
    from graders.cuda_engine.child import verdict
    kind = problem(kernel.kind)
    found = {}
    for shape in kernel.check_shapes:
        inputs = kind.make_inputs(shape, torch.Generator(device="cuda").manual_seed(1))
        out = torch.empty(kind.out_shape(shape), device="cuda")
        kind.baseline(out, inputs)
        expected = kind.reference(inputs)
        found["x".join(map(str, shape))] = {"verdict": verdict(kind, out, expected),
                                            **kind.accuracy(out, expected)}
    return found


def row(kernel_id: str, result: dict) -> dict:
    """One step's line of the record: status, points, and where it was timed its times, bandwidths and ratios."""
    found = {"status": result["status"], "message": result.get("message", ""), "score": result["score"]}
    timing = result.get("timing")
    if timing:
        kernel, base = timing["kernel"], timing["baseline"]
        peak = (timing.get("ceiling") or {}).get("throughput")
        kind = problem(SPEC.kernel(kernel_id).kind)
        found |= {"ratio": timing["ratio"], "suggested_target": round(0.95 * timing["ratio"], 3),
                  "baseline": base["name"], "kernel_us": kernel["median_s"] * 1e6,
                  "baseline_us": base["median_s"] * 1e6, "work_unit": timing["work_unit"],
                  "kernel_throughput_g": kernel["throughput"] / 1e9,
                  "fraction_of_peak": kernel["throughput"] / peak if peak else None,
                  "rse": kernel["rse"], "samples": kernel["samples"], "shape": timing["shape"]}
        if kind.roof == "dram":   # bytes: beside a copy of as many
            found["copy_gbs"] = copy_gbs(kind.work(tuple(timing["shape"])))
            found["fraction_of_copy"] = found["kernel_throughput_g"] / found["copy_gbs"]
        found |= others_us(kernel_id)
    return found


@pytest.fixture(scope="module")
def scaled_mm_errors() -> dict:
    return scaled_mm_accuracy(SPEC.kernel("fp8_gemm"))


@pytest.fixture(scope="module")
def rows(scaled_mm_errors) -> dict:
    found, checks, environment = {}, {}, None
    for kid, kernel in SPEC.kernels.items():
        result = grade(kid, kernel.reference.read_text())
        found[kid] = row(kid, result)
        checks[kid] = result.get("checks", [])
        environment = environment or result.get("environment")
    fields = {"environment": environment, "targets_in_spec": SPEC.targets, "kernels": found,
              "scaled_mm_accuracy": scaled_mm_errors,
              "flashinfer": "not installed: paged_decode's baseline is the gather + SDPA"}
    path = records.write_gpu_record("serving", "the serving track's references graded at the spec's shapes", fields,
                                    track="serving")
    lines = [f"{'step':<14}{'status':<10}{'us':>10}{'G/s':>8}{'x base':>8}{'% copy':>8}{'% peak':>8}{'points':>8}"]
    for kid, r in found.items():
        lines.append(f"{kid:<14}{r['status']:<10}{r['kernel_us']:>10.1f}{r['kernel_throughput_g']:>8.0f}"
                     f"{r['ratio']:>8.2f}{100 * r.get('fraction_of_copy', 0):>7.1f}%"
                     f"{100 * (r['fraction_of_peak'] or 0):>7.1f}%{r['score']['total']:>8.2f}" if "ratio" in r
                     else f"{kid:<14}{r['status']:<10}  {r['message'][:90]}")
    print("\n" + "\n".join(lines) + f"\nwrote {path}")
    return {kid: r | {"checks": checks[kid]} for kid, r in found.items()}


def test_every_reference_is_correct_at_every_check_shape(rows):
    for kid, r in rows.items():
        assert r["status"] == "ok", f"{kid}: {r['message']}"
        assert r["score"]["correctness"] == SPEC.kernel(kid).points_correct
        shapes = {tuple(c["shape"]) for c in r["checks"] if c["ok"]}
        assert shapes >= set(SPEC.kernel(kid).check_shapes), kid


@pytest.mark.parametrize("kernel_id", GOALS)
def test_the_reference_reaches_the_issues_share_of_the_copy(rows, kernel_id):
    r = rows[kernel_id]
    assert r["fraction_of_copy"] >= GOALS[kernel_id], (r["kernel_throughput_g"], r["copy_gbs"])


def test_the_fp8_reference_reaches_the_issues_share_of_scaled_mm(rows):
    r = rows["fp8_gemm"]
    assert r["ratio"] >= FP8_GOAL, (r["kernel_throughput_g"], r["ratio"])


def test_scaled_mm_meets_the_fp8_kinds_tolerance(scaled_mm_errors):
    """cuBLASLt's fp8 GEMM, which adds the tensor cores' 13-bit sums into fp32 every 128 products (a relative Frobenius
    error of 1.26-1.28e-4 on an H100), is within the kind's 2e-4: where it is not, revisit the tolerance
    (tracks/serving/problem.py) with these errors."""
    assert not any(a["verdict"] for a in scaled_mm_errors.values()), scaled_mm_errors


@pytest.mark.parametrize("kernel_id", ["rmsnorm", "swiglu"])
def test_the_fusions_beat_torch_compiles_fused_kernel(rows, kernel_id):
    r = rows[kernel_id]
    assert r["kernel_us"] < r["torch_compile_us"], (r["kernel_us"], r["torch_compile_us"])


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_solution_gets_its_expected_status_and_points(path):
    kid = tracks.graded_kernel(path)
    result = grade(kid, path.read_text())
    problem_ = tracks.unmet_expectation(path, result["status"], result["score"]["total"])
    assert not problem_, f"{problem_}: {result['message']}"


# ---- nbgrader's grading of the notebook ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The course graded by nbgrader: the reference, the stub and the known-wrong solutions, then the record."""
    from workshop.course import Autograding, Course
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
        grading = Autograding(Course(tmp_path_factory.mktemp("serving-gpu-course"), "serving"))
        yield grading
        records.write_gpu_record(
            "serving-nbgrader-gpu",
            "nbgrader autograde of the serving track: reference, stub and its known-wrong solutions",
            {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
             "seconds_per_submission": grading.seconds, "scores": grading.scores}, dists=("nbgrader",),
            folder="serving")


def test_nbgrader_gives_the_reference_every_answer_and_every_correctness_point(graded):
    from workshop.submissions import cuda_answers
    scores = graded.grade("reference", cuda_answers("serving"))
    assert all(scores[f"{q.id}_score"] == q.points for q in SERVING.QUESTIONS), scores
    for kid, kernel in SPEC.kernels.items():
        assert scores[f"{kid}_score"] >= kernel.points_correct, (kid, scores[f"{kid}_score"])
        if SPEC.targets == "measured":
            assert scores[f"{kid}_score"] == kernel.points, (kid, scores[f"{kid}_score"])


def test_nbgrader_gives_the_stub_zero_with_an_error_in_each_graded_cell(graded):
    from workshop.course import stderr_text
    scores = graded.grade("stub", {})
    assert scores and not any(scores.values()), scores
    for grade_id, outputs in graded.test_cell_outputs("stub").items():
        assert not stderr_text(outputs), (grade_id, stderr_text(outputs))
        assert any(o.get("output_type") == "error" for o in outputs), (grade_id, outputs)


def test_nbgrader_gives_each_known_wrong_solution_its_expected_points(graded):
    from workshop.submissions import wrong_group_answers, wrong_groups
    missed = {}
    for i, group in enumerate(wrong_groups("serving")):
        scores = graded.grade(f"wrong{i}", wrong_group_answers("serving", group))
        for path in group.values():
            for grade_id, expected in tracks.expected_points(path).items():
                if not expected.matches(scores[grade_id]):
                    missed[f"{path.name}: {grade_id}"] = (scores[grade_id], str(expected))
    assert not missed, missed
