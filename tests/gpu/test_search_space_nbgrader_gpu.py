"""A GEMM submission whose autotuning search space is 10^10 configurations (100 values a key), autograded by
nbgrader on a GPU (the GEMM track autogrades only there): the hidden ``check_search`` test refuses it from the
lists' lengths, naming the cap, without expanding it, and nbgrader's peak memory stays within 256 MB of an
honest submission's. Only the autotuned kernel is handed in (the other kernels stay the stub). Records both
gradings' seconds and peaks under benchmarks/results/gemm/ (``gemm-search-space-nbgrader-gpu-<date-time>.json``).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graders.cuda_engine.structure import MAX_SPACE, TUNABLE, load_structure
from workshop.course import Autograding, Course, nbgrader_env
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers

pytestmark = pytest.mark.gpu
HEADROOM = 256 << 20
HUGE_SPACE = {key: list(range(4, 404, 4)) for key in TUNABLE}
RULES = load_structure("gemm").autotune


def _peak_autograde(course: Course, student: str) -> tuple[int, float]:
    """(nbgrader's peak resident memory, seconds) of ``nbgrader autograde`` of one student, read from
    /proc/PID/status (VmHWM) until it exits."""
    log = course.root / f"autograde-{student}.log"
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", course.assignment,
                                 f"--student={student}", "--force"], cwd=course.root, env=nbgrader_env(),
                                stdout=out, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            try:
                line = next(x for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                            if x.startswith("VmHWM"))
                peak = max(peak, int(line.split()[1]) << 10)
            except (OSError, StopIteration):
                pass
            time.sleep(0.1)
    assert proc.returncode == 0, log.read_text()[-4000:]
    return peak, time.monotonic() - start


@pytest.fixture(scope="module")
def gradings(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_CELL_TIMEOUT", "150")
        env.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
        course = Course(tmp_path_factory.mktemp("gemm-space-gpu-course"), "gemm")
        honest = {"autotuned": cuda_answers("gemm")["autotuned"]}
        huge = {"autotuned": re.sub(r"^autotuned_space = .*$", f"autotuned_space = {json.dumps(HUGE_SPACE)}",
                                    honest["autotuned"], count=1, flags=re.M)}
        assert huge != honest
        measured = {}
        for student, answers in (("honest", honest), ("huge-space", huge)):
            course.submit(student, answers)
            measured[student] = _peak_autograde(course, student)
        yield course, measured
        write_gpu_record(
            "gemm-search-space-nbgrader-gpu",
            "nbgrader autograde of the GEMM track's autotuned kernel: an honest search space, and one of 10^10 "
            "configurations (100 values a key)",
            {"perf_budget_s_per_kernel": float(os.environ["WORKSHOP_PERF_BUDGET_S"]),
             "peak_rss_mb": {s: round(m[0] / 2**20) for s, m in measured.items()},
             "seconds": {s: round(m[1], 1) for s, m in measured.items()},
             "scores": {s: course.scores(s) for s in measured}}, dists=("nbgrader",), folder="gemm")


def test_a_huge_search_space_is_refused_naming_the_cap_and_the_choice_still_graded(gradings):
    course, _ = gradings
    honest, huge = course.scores("honest"), course.scores("huge-space")
    assert honest[RULES.check_id] == RULES.points
    assert huge[RULES.check_id] == 0
    assert huge["autotuned_score"] == honest["autotuned_score"] > 0
    outputs = Autograding(course).test_cell_outputs("huge-space")[RULES.check_id]
    text = "".join(o.get("text", "") + o.get("evalue", "") for o in outputs)
    assert f"the search space lists {100 ** 5} configurations" in text and f"expands at most {MAX_SPACE}" in text


def test_nbgrader_grows_by_at_most_256_MB_over_the_honest_grading(gradings):
    _, measured = gradings
    (honest, _), (huge, seconds) = measured["honest"], measured["huge-space"]
    assert huge <= honest + HEADROOM, f"nbgrader peaked at {huge >> 20} MB; {honest >> 20} MB for the honest one"
    assert seconds < 600
