"""Puzzle grading on the simulator: every reference passes, every known-wrong solution fails as it says."""
import functools
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graders import settings
from graders.numba_engine import catalogue
from graders.numba_engine import grade as puzzle_grade
from graders.numba_engine.grade import (PuzzleFailed, assert_correct, assert_within_limits, check, grade_correctness,
                                        grade_limits)
from graders.numba_engine.puzzle import NOT_WRITTEN
from graders.sandbox import starvation
from graders.sandbox.run import ChildResult
from graders.tracks import expected_points
from puzzle_cells import REFERENCE, SOLUTIONS, run_cells
from workshop.cells import read_cells

WRONG = sorted(SOLUTIONS.glob("wrong/*.py"))
KERNEL_LEVEL_WRONG = [p for p in WRONG if "_cell_" not in p.stem]   # cell-level ones run under nbgrader


def test_library_has_the_fourteen_puzzles_in_order():
    assert [p.number for p in catalogue.PUZZLES] == list(range(1, 15))
    assert {p.id for p in catalogue.PUZZLES} == set(REFERENCE) - {"setup"}


@pytest.mark.parametrize("puzzle", catalogue.PUZZLES, ids=lambda p: p.id)
def test_reference_passes_correctness_and_limits(puzzle):
    kernel = run_cells(REFERENCE[puzzle.id])[puzzle.kernel_name]
    grade_correctness(puzzle.id, kernel)
    grade_limits(puzzle.id, kernel)


@pytest.mark.parametrize("puzzle", catalogue.PUZZLES, ids=lambda p: p.id)
def test_hidden_cases_include_every_public_size_and_more(puzzle):
    public, hidden = puzzle.cases("public"), puzzle.cases("hidden")
    assert set(public) <= set(hidden) and len(hidden) >= 2


HIDDEN_TESTS = {"correct": grade_correctness, "limits": grade_limits}
HANGS = SOLUTIONS / "wrong" / "blocks_hangs.py"


@functools.cache
def hidden_tests(path) -> tuple[dict[str, PuzzleFailed | None], float]:
    """Both hidden tests of a known-wrong cell file, run at once as the trusted grader runs them (threads), so that
    they share one child (`grade.run_source`): a kernel that hangs is stopped once, not once a test. Each test's
    `PuzzleFailed` (None where it passed) and the seconds both took; once a module, so the hang's tests share it."""
    (puzzle_id, source), = read_cells(path).items()
    kernel = run_cells(source)[catalogue.get(puzzle_id).kernel_name]

    def failure(grade) -> PuzzleFailed | None:
        try:
            grade(puzzle_id, kernel)
        except PuzzleFailed as exc:
            return exc
        return None

    start = time.monotonic()
    with ThreadPoolExecutor(len(HIDDEN_TESTS)) as pool:
        failures = dict(zip(HIDDEN_TESTS, pool.map(failure, HIDDEN_TESTS.values())))
    return failures, time.monotonic() - start


@pytest.mark.parametrize("path", KERNEL_LEVEL_WRONG, ids=lambda p: p.stem)
def test_known_wrong_solution_loses_exactly_what_it_says(path):
    (puzzle_id, _), = read_cells(path).items()
    failures, _ = hidden_tests(path)
    for part, failed in failures.items():
        loses = expected_points(path)[f"{puzzle_id}_{part}"].matches(0)
        assert (failed is not None) == loses, (part, failed)


def test_hard_coded_answer_passes_the_self_check_but_not_the_hidden_test(capsys):
    (_, source), = read_cells(SOLUTIONS / "wrong" / "map_hardcoded.py").items()
    kernel = run_cells(source)["map_kernel"]
    check("map", kernel)
    assert capsys.readouterr().out.startswith("✓ Map: correct on the 1 public case(s)")
    with pytest.raises(PuzzleFailed, match=r"^Map: case .*: out\[\d\] = .*, expected"):
        grade_correctness("map", kernel)


def test_failure_names_the_constraint_and_the_counted_figure():
    (_, source), = read_cells(SOLUTIONS / "wrong" / "pooling_global_reads.py").items()
    kernel = run_cells(source)["pool_kernel"]
    with pytest.raises(PuzzleFailed, match=r"made 3 global reads; the limit is 1 per thread"):
        grade_limits("pooling", kernel)


STUB = ("@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n    # YOUR CODE HERE\n"
        "    raise NotImplementedError()\n")


def test_untouched_stub_scores_zero_and_is_not_written_yet_in_one_line(capsys):
    """The same line everywhere, with no case and no seed: a stub fails on any input."""
    kernel = run_cells(STUB)["map_kernel"]
    with pytest.raises(PuzzleFailed) as hidden:
        grade_correctness("map", kernel)
    assert str(hidden.value) == f"Map: {NOT_WRITTEN}"
    with pytest.raises(PuzzleFailed) as hidden:
        grade_limits("map", kernel)
    assert str(hidden.value) == f"Map: access limits are graded once the kernel is correct: {NOT_WRITTEN}"
    check("map", kernel)
    assert capsys.readouterr().out == f"✗ Map: {NOT_WRITTEN}\n"
    with pytest.raises(PuzzleFailed) as failed:
        assert_correct("map", kernel)
    assert failed.value._render_traceback_() == [f"PuzzleFailed: Map: {NOT_WRITTEN}"]
    with pytest.raises(PuzzleFailed, match=re.escape(f"Map: access limits are graded once the kernel is correct: "
                                                     f"{NOT_WRITTEN}")):
        assert_within_limits("map", kernel)


def _release_stub(cell: str) -> str:
    """``cell`` as nbgrader releases it: the solution replaced by its stub, at the solution's indentation."""
    return re.sub(r"( *)### BEGIN SOLUTION\n.*?### END SOLUTION\n?",
                  lambda m: f"{m[1]}# YOUR CODE HERE\n{m[1]}raise NotImplementedError()\n", cell, flags=re.DOTALL)


@pytest.mark.parametrize("on", ["gpu", "sim"], ids=["on-a-gpu-worker", "on-the-simulator"])
def test_every_release_stub_is_refused_without_a_child(monkeypatch, on):
    """No child, also on a GPU worker (where a kernel's raise is not reported and the stub would be compiled,
    launched and found wrong, puzzle by puzzle)."""
    def no_child(*args, **kwargs):
        raise AssertionError("a child was started for an untouched stub")
    monkeypatch.setattr(puzzle_grade, "run_child_unstarved", no_child)
    for puzzle in catalogue.PUZZLES:
        stub = _release_stub(REFERENCE[puzzle.id])
        assert "raise NotImplementedError()" in stub and "BEGIN SOLUTION" not in stub
        result = puzzle_grade.run_source(puzzle.id, stub, puzzle.kernel_name, "hidden", on)
        assert (result.status, result.message) == (puzzle_grade.Status.KERNEL_ERROR, NOT_WRITTEN), puzzle.id


@pytest.mark.parametrize("body", ["out[i] = a[i] + 10\n    raise NotImplementedError()",
                                  "x = a[i]\n    raise NotImplementedError()",
                                  "if i < size:\n        raise NotImplementedError()",
                                  "cuda.atomic.add(out, i, 1.0)\n    raise NotImplementedError()",
                                  "raise ValueError()",
                                  "out[i] = a[i] + 10"])
def test_a_kernel_that_may_write_or_raises_otherwise_is_not_a_stub(body):
    """Only a kernel that cannot write before it raises NotImplementedError is refused unrun; one that writes
    first runs (and the simulator's raise fails it there), and so does any other."""
    source = f"@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n    {body}\n"
    assert not puzzle_grade.untouched_stub(source, "map_kernel")


def test_graded_cells_public_tests_pass_a_correct_kernel_and_name_a_wrong_one(capsys):
    assert_correct("zip", run_cells(REFERENCE["zip"])["zip_kernel"])
    assert_within_limits("zip", run_cells(REFERENCE["zip"])["zip_kernel"])
    assert capsys.readouterr().out.splitlines() == [
        "✓ Zip: correct on the public case(s); graded on fresh inputs and more sizes",
        "✓ Zip: within the access limits (at most 2 global read(s) and 1 global write(s) per thread) on the "
        "public case(s)"]
    (_, source), = read_cells(SOLUTIONS / "wrong" / "zip_subtracts.py").items()
    with pytest.raises(PuzzleFailed, match=re.escape("Zip: case 1 of 1 (public): a[4], b[4]; size = 4; <<<1, 4>>>: "
                                                     "out[0] = ")):
        assert_correct("zip", run_cells(source)["zip_kernel"])
    (_, source), = read_cells(SOLUTIONS / "wrong" / "pooling_global_reads.py").items()
    assert_correct("pooling", run_cells(source)["pool_kernel"])
    with pytest.raises(PuzzleFailed, match=r"^Pooling: access limits \(public\): case 1 of 1 \(a\[8\]; size = 8; "
                                           r"<<<1, 8>>>\): threadIdx \(\d+, 0, 0\) of blockIdx \(0, 0, 0\) made 3 "
                                           r"global reads; the limit is 1"):
        assert_within_limits("pooling", run_cells(source)["pool_kernel"])


def test_printing_a_local_value_in_a_kernel_is_not_a_memory_access(capsys):
    kernel = run_cells("@cuda.jit\ndef zip_kernel(out, a, b, size):\n    i = cuda.threadIdx.x\n"
                       "    total = a[i] + b[i]\n    print('thread', i, 'of', size, total)\n"
                       "    out[i] = total\n")["zip_kernel"]
    grade_limits("zip", kernel)
    assert_within_limits("zip", kernel)


def test_a_simulator_thread_is_named_as_cuda_names_it():
    kernel = run_cells("@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n"
                       "    out[i] = a[i + 1] + 10\n")["map_kernel"]
    with pytest.raises(PuzzleFailed, match=r"IndexError: threadIdx \(3, 0, 0\) of blockIdx \(0, 0, 0\): "
                                           r"out-of-bounds read of a\[4\]"):
        assert_correct("map", kernel)


SLOW_SHARED_ALLOCATION = """
import json, sys, time
from graders.numba_engine import child
made = child._PoisoningNumpy.empty
def slow(*args, **kwargs):   # another thread runs meanwhile, as on a busy worker
    time.sleep(0.02)
    return made(*args, **kwargs)
child._PoisoningNumpy.empty = staticmethod(slow)
for puzzle, name, source in json.load(sys.stdin):
    answer = child.handle({"puzzle": puzzle, "source": source, "kernel_name": name, "mode": "hidden", "seed": 1,
                           "target": "sim"})
    print(puzzle, answer["status"], answer["message"])
"""


def test_a_blocks_threads_share_one_shared_array_however_slow_its_allocation():
    """The simulator's threads are Python threads: two of them allocating a block's shared array at once each made
    one, and an honest kernel read NaN on a busy worker. With each allocation slow (a thread switch inside it, as
    load makes likely), every shared-memory reference is still correct."""
    shared = [(p.id, p.kernel_name, "import numba\nfrom numba import cuda\n" + REFERENCE[p.id])
              for p in catalogue.PUZZLES if p.limits.shared_memory]
    done = subprocess.run([sys.executable, "-c", SLOW_SHARED_ALLOCATION], input=json.dumps(shared),
                          capture_output=True, text=True, cwd=settings.PACKAGE_ROOT, timeout=120,
                          env=os.environ | {"NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode == 0, done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines()] == [[p, "ok"] for p, _, _ in shared], done.stdout


def test_hanging_kernel_is_stopped_at_the_time_limit():
    """Stopped at its limit, each run 5 s of start-up at most; where the worker starved the first run (a loaded
    machine), a second run with `starvation.RETRY_FACTOR` x the limit, which the message then names. The run is
    the known-wrong test's (`hidden_tests`): both hidden tests, one child."""
    failures, elapsed = hidden_tests(HANGS)
    assert all(isinstance(failed, PuzzleFailed) for failed in failures.values()), failures
    message = str(failures["correct"])
    assert re.search(r"timeout \(hidden, seed \d+\): stopped after", message), message
    limit = puzzle_grade.timeout_s()
    runs = [limit, starvation.RETRY_FACTOR * limit] if "a second run" in message else [limit]
    assert elapsed < sum(runs) + 5 * len(runs), (elapsed, message)


def test_wrong_signature_is_explained():
    kernel = run_cells("@cuda.jit\ndef map_kernel(out, a):\n    out[0] = a[0]\n")["map_kernel"]
    with pytest.raises(PuzzleFailed, match="keep the signature"):
        grade_correctness("map", kernel)


def test_gpu_launch_path_runs_kernels_on_guarded_views():
    """The GPU path's plumbing (guard bands, views, copy back), exercised on the simulator."""
    import numpy as np
    from graders.numba_engine.child import _launch_on_gpu
    puzzle = catalogue.get("matmul")
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    case = puzzle.cases("hidden")[-1]
    inputs = puzzle.make_inputs(case, np.random.default_rng(0))
    out = _launch_on_gpu(kernel, case, np.full(case.out, np.nan, np.float32), inputs, ["out", "a", "b"])
    np.testing.assert_allclose(out, puzzle.expected(case, inputs))


def test_guard_band_catches_any_write_past_the_array_even_nan():
    """On the GPU an out-of-bounds write lands in the guard band; NaN written there must show too."""
    import numpy as np
    from graders.numba_engine.child import GUARD, WRITE_SENTINEL, _guarded, guard_violation
    before = _guarded(np.zeros((4,), np.float32), WRITE_SENTINEL)
    assert guard_violation(before, before.copy()) is None
    after = before.copy()
    after[GUARD + 5] = np.nan          # out[5] of a 4-element output
    assert guard_violation(before, after) == (5,)
    grid = _guarded(np.zeros((2, 3), np.float32), WRITE_SENTINEL)
    touched = grid.copy()
    touched[GUARD + 1, GUARD + 3] = 1.0  # out[1, 3]: one column past the end of row 1
    assert guard_violation(grid, touched) == (1, 3)


RACY = sorted(SOLUTIONS.glob("racy/*.py"))


def _gpu_run_taken_as(monkeypatch, run, seconds: float = 0.0, memcheck: str = "") -> None:
    """`checked_gpu_run`'s GPU run (memcheck's) answered by ``run`` and ``memcheck``'s finding (after ``seconds``);
    the simulator's runs are real."""
    monkeypatch.setattr(puzzle_grade, "gpu_run", lambda *args: time.sleep(seconds) or (run, memcheck))


@pytest.mark.parametrize("path", RACY, ids=lambda p: p.stem)
def test_a_racy_kernel_that_a_gpu_gets_right_by_chance_fails_on_a_gpu_worker(path, monkeypatch):
    """The GPU run is taken as correct (as the GPU measured it for these two patterns); the simulator's verdict on
    the same hidden cases still fails it, before compute-sanitizer's is read (none on this machine: it is not)."""
    (puzzle_id, source), = read_cells(path).items()
    kernel = run_cells(source)[catalogue.get(puzzle_id).kernel_name]
    _gpu_run_taken_as(monkeypatch, puzzle_grade.GradeResult(puzzle_id, puzzle_grade.Status.OK, cases=3, seed=1,
                                                            target="gpu"))
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    checked = puzzle_grade.checked_gpu_run(puzzle_id, kernel)
    assert checked.status == puzzle_grade.Status.INCORRECT and checked.target == "gpu"
    assert checked.message.startswith("right on the GPU, but not in numba-cuda's simulator, which fills memory no "
                                      "thread wrote with NaN"), checked.message
    assert f"(hidden, seed {checked.seed})" in checked.message   # the seed that shows it: the simulator's
    assert expected_points(path) == {f"{puzzle_id}_correct": expected_points(path)[f"{puzzle_id}_correct"],
                                     f"{puzzle_id}_limits": expected_points(path)[f"{puzzle_id}_limits"]}
    assert expected_points(path)[f"{puzzle_id}_correct"].matches(0)


def test_a_clean_kernel_on_a_gpu_worker_goes_on_to_compute_sanitizer(monkeypatch):
    """The reference passes the simulator's check; then the sanitizer is required (none on this machine), unless
    WORKSHOP_SANITIZE=off."""
    from graders.cuda_engine.sanitizer import SanitizerMissing
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    gpu_run = puzzle_grade.GradeResult("matmul", puzzle_grade.Status.OK, cases=3, seed=1, target="gpu")
    _gpu_run_taken_as(monkeypatch, gpu_run)
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    with pytest.raises(SanitizerMissing, match="compute-sanitizer was not found"):
        puzzle_grade.checked_gpu_run("matmul", kernel)
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    assert puzzle_grade.checked_gpu_run("matmul", kernel) is gpu_run


def test_a_wrong_gpu_run_is_graded_as_it_ran_whatever_the_checks_beside_it_found(monkeypatch):
    """The checks start with the GPU run; where the run is wrong, their outcomes (a missing sanitizer here) are
    never read: the grade is the run's."""
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    wrong = puzzle_grade.GradeResult("matmul", puzzle_grade.Status.INCORRECT, "out[0] = 1, expected 2", cases=3,
                                     case="case 1 of 3", seed=1, target="gpu")
    _gpu_run_taken_as(monkeypatch, wrong)
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    assert puzzle_grade.checked_gpu_run("matmul", kernel) is wrong


def test_a_wrong_gpu_run_kills_the_sanitizer_run_beside_it(monkeypatch, tmp_path):
    """A hanging kernel ran to compute-sanitizer's limit (minutes) beside its timed-out GPU run: the sanitizer's
    child (here one that hangs, started as the tool's is) is killed once the GPU run is wrong, and the grade is the
    run's."""
    (tmp_path / "hanging_tool.py").write_text("def handle(request):\n    while True:\n        pass\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    from graders.sandbox.run import run_child
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    timed_out = puzzle_grade.GradeResult("matmul", puzzle_grade.Status.TIMEOUT, "ran past 30 s", target="gpu")
    _gpu_run_taken_as(monkeypatch, timed_out, seconds=1.0)
    monkeypatch.setattr(puzzle_grade, "sanitizer_finding",
                        lambda *args: run_child("hanging_tool", {}, timeout_s=120).message)
    started = time.monotonic()
    assert puzzle_grade.checked_gpu_run("matmul", kernel) is timed_out
    assert time.monotonic() - started < 20


def test_a_sanitizer_finding_fails_the_run_with_the_seed_it_ran_on(monkeypatch):
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    _gpu_run_taken_as(monkeypatch, puzzle_grade.GradeResult("matmul", puzzle_grade.Status.OK, cases=3, seed=1,
                                                            target="gpu"))
    monkeypatch.setenv("WORKSHOP_SEED", "77")
    seen = []
    monkeypatch.setattr(puzzle_grade, "sanitizer_finding",
                        lambda *args: seen.append(args) or "racecheck found 1 hazard")
    checked = puzzle_grade.checked_gpu_run("matmul", kernel)
    assert checked.status == puzzle_grade.Status.INCORRECT and checked.message == "racecheck found 1 hazard"
    assert checked.seed == 77 and seen == [("matmul", *puzzle_grade._source(kernel), 77, ("racecheck",))]


@pytest.mark.parametrize("status", [puzzle_grade.Status.OK, puzzle_grade.Status.KERNEL_ERROR])
def test_memchecks_finding_fails_the_gpu_run_it_watched_right_or_not(monkeypatch, status):
    """The GPU run is memcheck's: its finding is the grade's message, whatever the run's outputs were (a kernel
    memcheck stopped fails with the driver's error, less useful than where it wrote); racecheck is not read."""
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    _gpu_run_taken_as(monkeypatch, puzzle_grade.GradeResult("matmul", status, cases=3, seed=1, target="gpu"),
                      memcheck="compute-sanitizer --tool memcheck found 2 error(s); the first: Invalid __global__ "
                               "write")
    monkeypatch.setattr(puzzle_grade, "sanitizer_finding", lambda *args: pytest.fail("racecheck's outcome read"))
    monkeypatch.setenv("WORKSHOP_SEED", "5")
    checked = puzzle_grade.checked_gpu_run("matmul", kernel)
    assert checked.status == puzzle_grade.Status.INCORRECT and checked.seed == 5
    assert checked.message.startswith("compute-sanitizer --tool memcheck found 2 error(s)")


def _child_answering(monkeypatch, child: ChildResult) -> list[dict]:
    """`gpu_run`'s child stood in for by ``child``; the calls it got, each its handler, request and options."""
    calls: list[dict] = []
    monkeypatch.setattr(puzzle_grade, "run_child_unstarved", lambda handler, request, **options: calls.append(
        {"handler": handler, "request": request, **options}) or child)
    return calls


def _fake_sanitizer(monkeypatch, tmp_path) -> Path:
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("WORKSHOP_COMPUTE_SANITIZER", str(tool))
    return tool


def test_the_gpu_run_is_one_child_under_memcheck_on_the_checks_seed(monkeypatch, tmp_path):
    tool = _fake_sanitizer(monkeypatch, tmp_path)
    answer = puzzle_grade.GradeResult("map", puzzle_grade.Status.OK, cases=4, seed=9, hidden=True, target="gpu")
    calls = _child_answering(monkeypatch, ChildResult("ok", answer.as_dict(),
                                                      stdout="========= ERROR SUMMARY: 0 errors\n"))
    monkeypatch.setattr(puzzle_grade, "run_source", lambda *args: pytest.fail("a second GPU run"))
    run, finding = puzzle_grade.gpu_run("map", "source", "map_kernel", 9)
    assert (run, finding) == (answer, "")
    (call,) = calls
    assert call["request"]["seed"] == 9 and call["request"]["target"] == "gpu" and call["gpu"]
    assert call["wrapper"][:3] == (str(tool), "--tool", "memcheck") and "kns=map_kernel" in call["wrapper"]
    assert call["timeout_s"] == puzzle_grade.timeout_s()   # a hang costs the kernel's limit, not the tool's


def test_a_memcheck_run_past_the_kernels_limit_is_the_kernels_timeout(monkeypatch, tmp_path):
    """A hanging kernel costs its limit once: no plain run after it."""
    _fake_sanitizer(monkeypatch, tmp_path)
    _child_answering(monkeypatch, ChildResult("timeout", message="ran past its 30 s limit"))
    monkeypatch.setattr(puzzle_grade, "run_source", lambda *args: pytest.fail("a second GPU run"))
    run, finding = puzzle_grade.gpu_run("map", "source", "map_kernel", 9)
    assert (run.status, run.seed, run.target, finding) == (puzzle_grade.Status.TIMEOUT, 9, "gpu", "")
    assert run.message == "ran past its 30 s limit (under compute-sanitizer's memcheck)"


@pytest.mark.parametrize("child", [ChildResult("crash"), ChildResult("ok", {"error": "the handler raised"}),
                                   ChildResult("ok", {"status": "ok"}, stdout="no summary: the tool did not check")],
                         ids=["crash", "handler error", "no summary"])
def test_a_memcheck_run_without_a_verdict_is_done_again_plainly_then_memcheck_alone(monkeypatch, tmp_path, child):
    _fake_sanitizer(monkeypatch, tmp_path)
    _child_answering(monkeypatch, child)
    plain = puzzle_grade.GradeResult("map", puzzle_grade.Status.OK, cases=4, seed=3, target="gpu")
    monkeypatch.setattr(puzzle_grade, "run_source", lambda *args: plain)
    alone = []
    monkeypatch.setattr(puzzle_grade, "sanitizer_finding", lambda *args: alone.append(args) or "")
    assert puzzle_grade.gpu_run("map", "source", "map_kernel", 9) == (plain, "")
    assert alone == [("map", "source", "map_kernel", 9, ("memcheck",))]
    wrong = puzzle_grade.GradeResult("map", puzzle_grade.Status.INCORRECT, "out[0] = 1, expected 2", target="gpu")
    monkeypatch.setattr(puzzle_grade, "run_source", lambda *args: wrong)   # wrong: no memcheck after it
    assert puzzle_grade.gpu_run("map", "source", "map_kernel", 9) == (wrong, "") and len(alone) == 1


def test_without_the_sanitizer_the_gpu_run_is_a_plain_one(monkeypatch):
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    plain = puzzle_grade.GradeResult("map", puzzle_grade.Status.OK, cases=4, seed=3, target="gpu")
    monkeypatch.setattr(puzzle_grade, "run_source", lambda *args: plain)
    monkeypatch.setattr(puzzle_grade, "run_child_unstarved", lambda *args, **kwargs: pytest.fail("a memcheck run"))
    assert puzzle_grade.gpu_run("map", "source", "map_kernel", 9) == (plain, "")


def test_the_checks_run_beside_the_gpu_run_and_record_their_seconds(monkeypatch):
    """`checked_gpu_run` starts the simulator's re-run and compute-sanitizer's (a stand-in that takes 0.5 s) with
    the GPU run (one that takes 0.5 s): they overlap, and each one's seconds go to the phases `grade_correctness`
    publishes. The simulator runs in the calling thread, whose session (the trusted grader's) forks it."""
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    gpu_run = puzzle_grade.GradeResult("matmul", puzzle_grade.Status.OK, cases=3, seed=1, target="gpu")
    _gpu_run_taken_as(monkeypatch, gpu_run, seconds=0.5)
    monkeypatch.setattr(puzzle_grade, "sanitizer_finding", lambda *args: time.sleep(0.5) or "")
    simulated_in, limits_run = [], puzzle_grade._limits_run
    monkeypatch.setattr(puzzle_grade, "_limits_run",
                        lambda *args: simulated_in.append(threading.current_thread()) or limits_run(*args))
    phases: dict[str, float] = {}
    started = time.monotonic()
    assert puzzle_grade.checked_gpu_run("matmul", kernel, phases) is gpu_run
    assert simulated_in == [threading.current_thread()]
    assert sorted(phases) == ["gpu_run", "sanitizer", "simulator"] and phases["simulator"] > 0
    assert 0.5 <= phases["gpu_run"] < 2 and 0.5 <= phases["sanitizer"] < 2
    assert time.monotonic() - started < sum(phases.values()) - 0.3   # side by side, not one after another


def test_the_puzzle_grader_imports_cuda_core_only_when_it_runs_the_sanitizer():
    """Every puzzles notebook's kernel cell imports the grader: cuda.core (a second of start-up) waits until a GPU
    worker's `sanitizer_finding` needs it."""
    probe = "import sys, graders.numba_engine.grade\nprint(sorted(m for m in sys.modules if m.startswith('cuda.core')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=settings.PACKAGE_ROOT,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout


def _batch_calls(*puzzle_ids: str) -> list[tuple[tuple, dict]]:
    """``grade_correctness`` calls of the references of ``puzzle_ids``, as the trusted grader hands them."""
    return [((p, puzzle_grade.SubmittedKernel(*puzzle_grade._source(
        run_cells(REFERENCE[p])[catalogue.get(p).kernel_name]))), {}) for p in puzzle_ids]


def _batch_children(monkeypatch, tmp_path, answer) -> list[dict]:
    """The batch's children stood in for on a GPU worker: ``answer(tool, request)`` is each child's ChildResult;
    the calls they got."""
    _fake_sanitizer(monkeypatch, tmp_path)
    monkeypatch.setattr(puzzle_grade, "target", lambda: "gpu")
    calls: list[dict] = []

    def run_child(handler, request, **options):
        tool = options["wrapper"][2]
        calls.append({"tool": tool, "request": request, **options})
        return answer(tool, request)
    monkeypatch.setattr(puzzle_grade, "run_child", run_child)
    return calls


def _answered(request: dict, status: str = "ok", summary: str = "========= ERROR SUMMARY: 0 errors\n",
              **changed) -> ChildResult:
    answers = [puzzle_grade.GradeResult(r["puzzle"], puzzle_grade.Status(status), cases=3, seed=r["seed"],
                                        target="gpu").as_dict() | changed for r in request["launches"]]
    return ChildResult("ok", {"launches": answers}, stdout=summary)


def test_a_submissions_puzzles_run_on_the_gpu_in_one_memcheck_child_and_one_racecheck_child(monkeypatch, tmp_path):
    """One child a tool, side by side, each running the kernels in turn on seeds of their own, within the kernels'
    limit; the values are the memcheck child's runs, racecheck cleared for the kernels that use shared memory."""
    calls = _batch_children(monkeypatch, tmp_path, lambda tool, request: _answered(request))
    values = puzzle_grade.prepare_correctness_together(_batch_calls("map", "shared", "zip"))
    memcheck, racecheck = sorted(calls, key=lambda c: c["tool"])
    assert [r["puzzle"] for r in memcheck["request"]["launches"]] == ["map", "shared", "zip"]
    assert [r["puzzle"] for r in racecheck["request"]["launches"]] == ["shared"]
    assert all(c["timeout_s"] == puzzle_grade.timeout_s() and c["gpu"] for c in calls)
    seeds = [r["seed"] for r in memcheck["request"]["launches"]]
    assert len(set(seeds)) == 3 and racecheck["request"]["launches"][0]["seed"] == seeds[1]
    assert {"kns=map_kernel", "kns=shared_kernel", "kns=zip_kernel"} <= set(memcheck["wrapper"])
    assert [(v["run"].test, v["run"].seed, v["run"].status, v["racecheck_cleared"]) for v in values] == [
        ("map", seeds[0], "ok", False), ("shared", seeds[1], "ok", True), ("zip", seeds[2], "ok", False)]


@pytest.mark.parametrize("memcheck", [
    lambda request: _answered(request, summary="========= ERROR SUMMARY: 1 error\n"),
    lambda request: _answered(request, summary="no summary"),
    lambda request: _answered(request, status="kernel_error"),   # the context may be lost for the later kernels
    lambda request: _answered(request, seed=1),                  # not the seeds it was asked for
    lambda request: ChildResult("ok", {"launches": []}, stdout="========= ERROR SUMMARY: 0 errors\n"),
    lambda request: ChildResult("timeout", message="ran past 30 s"),
], ids=["a finding", "no summary", "a kernel error", "other seeds", "answers missing", "timeout"])
def test_a_memcheck_batch_that_does_not_clear_every_kernel_leaves_each_to_its_test(monkeypatch, tmp_path, memcheck):
    _batch_children(monkeypatch, tmp_path, lambda tool, request: memcheck(request) if tool == "memcheck" else
                    _answered(request))
    values = puzzle_grade.prepare_correctness_together(_batch_calls("map", "shared"))
    assert all(isinstance(v, puzzle_grade.NotBatched) for v in values), values


def test_after_a_kernel_error_in_a_batch_the_later_kernels_are_left_to_their_tests(monkeypatch, tmp_path):
    """A kernel error may lose the CUDA context: the kernels before it keep their batched runs, it and those after
    it are each run again by their tests."""
    def memcheck(request):
        answered = _answered(request)
        answered.answer["launches"][1]["status"] = "kernel_error"
        return answered
    _batch_children(monkeypatch, tmp_path, lambda tool, request: memcheck(request) if tool == "memcheck" else
                    _answered(request))
    values = puzzle_grade.prepare_correctness_together(_batch_calls("map", "zip", "guard"))
    assert values[0]["run"].status == "ok"
    assert all(isinstance(v, puzzle_grade.NotBatched) for v in values[1:]), values


def test_an_untouched_stub_stays_out_of_the_batch(monkeypatch, tmp_path):
    """A submission half done batches its written kernels; its stubs are refused unrun by their tests."""
    calls = _batch_children(monkeypatch, tmp_path, lambda tool, request: _answered(request))
    stub = "@cuda.jit\ndef zip_kernel(out, a, b, size):\n    i = cuda.threadIdx.x\n    raise NotImplementedError\n"
    values = puzzle_grade.prepare_correctness_together(
        _batch_calls("map") + [(("zip", puzzle_grade.SubmittedKernel(stub, "zip_kernel")), {})])
    assert values[0]["run"].status == "ok" and values[1] is None
    assert [r["puzzle"] for r in calls[0]["request"]["launches"]] == ["map"]


def test_a_racecheck_batch_with_a_hazard_leaves_racecheck_to_each_test(monkeypatch, tmp_path):
    _batch_children(monkeypatch, tmp_path, lambda tool, request: _answered(request) if tool == "memcheck" else
                    _answered(request, summary="========= RACECHECK SUMMARY: 1 hazard displayed (1 error, "
                                                       "0 warnings)\n"))
    values = puzzle_grade.prepare_correctness_together(_batch_calls("shared", "dot"))
    assert [v["racecheck_cleared"] for v in values] == [False, False]
    assert [v["run"].status for v in values] == ["ok", "ok"]


def test_no_batch_on_the_simulator_or_without_the_sanitizer(monkeypatch):
    monkeypatch.setattr(puzzle_grade, "run_child", lambda *a, **k: pytest.fail("a batch child"))
    monkeypatch.setattr(puzzle_grade, "target", lambda: "sim")
    assert puzzle_grade.prepare_correctness_together(_batch_calls("map")) == [None]
    monkeypatch.setattr(puzzle_grade, "target", lambda: "gpu")
    monkeypatch.setenv("WORKSHOP_SANITIZE", "off")
    assert puzzle_grade.prepare_correctness_together(_batch_calls("map")) == [None]


@pytest.mark.parametrize("cleared", [True, False])
def test_a_batched_gpu_run_is_checked_by_the_simulator_and_by_racecheck_where_its_batch_did_not_clear(
        monkeypatch, cleared):
    kernel = run_cells(REFERENCE["matmul"])["matmul_kernel"]
    monkeypatch.setattr(puzzle_grade, "gpu_run", lambda *args: pytest.fail("a GPU run of its own"))
    raced = []
    monkeypatch.setattr(puzzle_grade, "sanitizer_finding", lambda *args: raced.append(args) or "")
    run = puzzle_grade.GradeResult("matmul", puzzle_grade.Status.OK, cases=3, seed=42, target="gpu")
    phases: dict[str, float] = {}
    assert puzzle_grade.checked_gpu_run("matmul", kernel, phases, {"run": run, "racecheck_cleared": cleared}) is run
    assert raced == ([] if cleared else [("matmul", *puzzle_grade._source(kernel), 42, ("racecheck",))])
    assert "simulator" in phases and "gpu_run" not in phases
    (puzzle_id, source), = read_cells(RACY[0]).items()   # the simulator still fails a race
    racy_kernel = run_cells(source)[catalogue.get(puzzle_id).kernel_name]
    right = puzzle_grade.GradeResult(puzzle_id, puzzle_grade.Status.OK, cases=3, seed=42, target="gpu")
    checked = puzzle_grade.checked_gpu_run(puzzle_id, racy_kernel, None, {"run": right, "racecheck_cleared": True})
    assert checked.status == puzzle_grade.Status.INCORRECT and "numba-cuda's simulator" in checked.message


def test_the_child_answers_a_batch_launch_by_launch():
    """`graders.numba_engine.child.handle` with ``launches``: each request's own answer, in order (the simulator)."""
    script = (
        "import json, sys\n"
        "from graders.numba_engine import child\n"
        "print(json.dumps(child.handle(json.loads(sys.argv[1]))))\n")
    requests = [{"puzzle": p, "source": puzzle_grade._source(run_cells(REFERENCE[p])[catalogue.get(p).kernel_name])[0],
                 "kernel_name": catalogue.get(p).kernel_name, "mode": "hidden", "seed": 3 + i, "target": "sim"}
                for i, p in enumerate(["map", "shared"])]
    requests.append(requests[0] | {"source": requests[0]["source"].replace("+ 10", "+ 11")})
    done = subprocess.run([sys.executable, "-c", script, json.dumps({"launches": requests})], capture_output=True,
                          text=True, cwd=settings.PACKAGE_ROOT, env=os.environ | {"NUMBA_ENABLE_CUDASIM": "1"},
                          check=True)
    answers = json.loads(done.stdout.splitlines()[-1])["launches"]
    assert [(a["test"], a["seed"], a["status"]) for a in answers] == [
        ("map", 3, "ok"), ("shared", 4, "ok"), ("map", 3, "incorrect")]
