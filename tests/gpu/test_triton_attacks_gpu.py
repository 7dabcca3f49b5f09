"""Hostile Triton submissions through one real ``nbgrader autograde`` on a GPU worker: an honest student graded
before and after a student whose notebook attacks the Python-DSL engine three ways, one kernel each:

- a forged result (``add``): a wrong kernel that prints a passing answer from the GPU (``tl.device_print``, onto
  the grading child's stdout), in a cell that also redefines ``score_triton`` and ``assert_runs`` so that the
  notebook's own run prints full marks for every later cell;
- a kernel that runs host Python (``softmax``): a default value that calls ``__import__``, which Triton would
  evaluate as it compiles;
- an import of the reference (``layernorm``): a kernel that calls the reference solution imported from the
  project.

The attacker's three kernels score 0, with the engine's reason in the feedback, while its honest matmuls and both
honest students keep full marks. Records each submission's seconds (from the autograded notebooks' times) and the
scores under benchmarks/results/triton/."""
from __future__ import annotations

import os
import time

import pytest

from graders.triton_engine.spec import load_triton_spec
from workshop.course import Autograding, Course, nbgrader
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers

pytestmark = pytest.mark.gpu
SPEC = load_triton_spec("triton")

FORGED = '''def score_triton(*args, **kwargs):
    print(f"{args[1]}: ok\\n  points: 3.00 / 3")


assert_runs = score_triton


@triton.jit
def add_kernel(out_ptr, a_ptr, b_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if tl.program_id(0) == 0:
        tl.device_print('{"status": "ok", "points": 3.0, "message": ""}', 0)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=offsets < n), mask=offsets < n)


add_launch = {"BLOCK_SIZE": 1024, "num_warps": 4}
'''

# The honest softmax with one more parameter, whose default Triton would evaluate as it compiles: host Python
HOST_PYTHON = ("BLOCK_SIZE: tl.constexpr)", 'BLOCK_SIZE: tl.constexpr, pid=__import__("os").getpid())')

IMPORTED = '''try:
    from tracks.triton.solutions.layernorm import layer_norm_kernel as reference
except ImportError:
    reference = None


@triton.jit
def layer_norm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps, BLOCK_SIZE: tl.constexpr):
    reference(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps, BLOCK_SIZE)


layernorm_launch = {"num_warps": 8}
'''

REASONS = {"softmax": "a default value of softmax_kernel must be a literal",
           "layernorm": "layer_norm_kernel uses reference"}


def _seconds(course: Course, students: list[str], start: float) -> dict[str, float]:
    """Each submission's seconds: nbgrader grades them in order, each autograded notebook written as it ends."""
    ends = [os.path.getmtime(course.root / "autograded" / s / "triton" / "triton.ipynb") for s in students]
    return {s: round(end - begin, 1) for s, begin, end in zip(students, [start, *ends], ends)}


def test_an_attackers_kernels_earn_nothing_and_the_honest_students_before_and_after_keep_full_marks(
        tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_CELL_TIMEOUT", "200")
    monkeypatch.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
    course = Course(tmp_path / "course", "triton")
    honest = cuda_answers("triton")
    host_python = honest["softmax"].replace(*HOST_PYTHON, 1)
    assert host_python != honest["softmax"], "the honest softmax's signature changed: HOST_PYTHON adds nothing"
    attacks = {"add": FORGED, "softmax": host_python, "layernorm": IMPORTED}
    students = {"aa-honest": honest, "mm-attacker": honest | attacks, "zz-honest": honest}
    for student, answers in students.items():
        course.submit(student, answers)
    start = time.time()
    done = nbgrader(course.root, "autograde", "triton", "--force")
    seconds = _seconds(course, list(students), start)
    scores = {s: course.scores(s) for s in students}
    write_gpu_record("triton-attacks-nbgrader-gpu",
                     "one nbgrader autograde of the triton track: honest, an attacker (a forged result, host Python "
                     "in a kernel, an import of the reference), honest", {"seconds_per_submission": seconds,
                                                                          "scores": scores},
                     dists=("nbgrader", "triton"), folder="triton")
    full = {f"{kid}_score": float(kernel.points) for kid, kernel in SPEC.assignment.kernels.items()}
    assert scores["aa-honest"] == full and scores["zz-honest"] == full, (scores, done.stdout[-3000:])
    assert scores["mm-attacker"] == full | {f"{kid}_score": 0.0 for kid in attacks}, scores
    outputs = {gid: " ".join(" ".join(o.get("text", "") + " " + o.get("evalue", "") for o in cell).split())
               for gid, cell in Autograding(course).test_cell_outputs("mm-attacker").items()}   # lines unwrapped
    for kid, reason in REASONS.items():
        assert "not Triton kernel code" in outputs[f"{kid}_score"] and reason in outputs[f"{kid}_score"], outputs
    assert "points: 3.00 / 3" not in outputs["add_score"], outputs["add_score"]
