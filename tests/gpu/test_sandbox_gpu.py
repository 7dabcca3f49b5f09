"""The allowlist sandbox on a GPU worker, through one real `nbgrader autograde` of the vecadd track: an honest
student graded before and after a student whose kernels ``#include`` the reference solutions from another copy
of the project on the worker (a backup, a second checkout). The GPU children see the driver, the toolkit and
the Python installation, never that copy: the includer scores 0, the honest students full marks both times.
Records the seconds per submission and the scores under benchmarks/results/platform/. Also: torch and Triton on the
GPU in a grading child under the default memory cap, with the sandbox's cgroup and without."""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from graders.cuda_engine.spec import load_spec
from graders.settings import ROOT
from workshop.course import Course, nbgrader
from workshop.records import write_gpu_record
from workshop.submissions import cuda_answers

pytestmark = pytest.mark.gpu
SPEC = load_spec("vecadd")


@pytest.fixture(scope="module")
def solutions_copy():
    """A copy of the project's tracks/ outside the course and outside /tmp (a backup on the worker)."""
    base = Path("/var/tmp") / f"kw-backup-{uuid.uuid4().hex}"
    shutil.copytree(ROOT / "tracks", base / "tracks")
    yield base / "tracks"
    shutil.rmtree(base, ignore_errors=True)


def test_an_include_of_another_copy_of_the_solutions_earns_nothing(solutions_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_CELL_TIMEOUT", "150")
    monkeypatch.setenv("WORKSHOP_PERF_BUDGET_S", os.environ.get("WORKSHOP_PERF_BUDGET_S") or "1.5")
    course = Course(tmp_path / "course", "vecadd")
    includes = {kid: f'#include "{solutions_copy / "vecadd" / "solutions" / f"{kid}.cu"}"' for kid in SPEC.kernels}
    assert all(Path(line.split('"')[1]).is_file() for line in includes.values())
    students = {"aa-honest": cuda_answers("vecadd"), "mm-includer": cuda_answers("vecadd", includes),
                "zz-honest": cuda_answers("vecadd")}
    for student, answers in students.items():
        course.submit(student, answers)
    start = time.monotonic()
    done = nbgrader(course.root, "autograde", "vecadd", "--force")
    seconds = round(time.monotonic() - start, 1)
    scores = {s: course.scores(s) for s in students}
    full = {f"{kid}_score": float(k.points) for kid, k in SPEC.kernels.items()}
    write_gpu_record("sandbox-include-attack-gpu",
                     "one nbgrader autograde of vecadd: honest, a kernel including the reference from another copy "
                     "of the project on the worker, honest", {"seconds_for_all": seconds, "scores": scores},
                     dists=("nbgrader",))
    assert scores["aa-honest"] == full and scores["zz-honest"] == full, (scores, done.stdout[-3000:])
    assert set(scores["mm-includer"].values()) == {0.0}, scores
    outputs = "".join(str(c.get("outputs", "")) for c in course.autograded("mm-includer").cells)
    assert "cannot open source file" in outputs
    assert "a[i] + b[i]" not in outputs   # nothing of the reference's text came back


GPU_HANDLER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def handle(request):
    if request.get("touch_gib"):   # host memory written, page by page: the cap counts it either way
        block = bytearray(request["touch_gib"] << 30)
        block[::4096] = bytes(len(block) // 4096)
        return {"touched": len(block)}
    a = torch.randn(4096, 4096, device="cuda")
    product = (a @ a).sum().item()
    x = torch.ones(1 << 20, device="cuda")
    _double[(x.numel() // 1024,)](x, x.numel(), BLOCK=1024)
    return {"finite": product == product, "doubled": x.sum().item()}
'''


@pytest.mark.parametrize("cgroups", ["on", "off"])
def test_a_gpu_child_under_the_default_memory_cap(tmp_path, monkeypatch, cgroups):
    # the cap every grading child gets unless it names one (settings.child_memory_bytes): torch and Triton work
    # on the GPU under it, with the sandbox's memory cgroup or, without one, RLIMIT_DATA per process
    from graders import settings
    from graders.sandbox.run import run_child
    if cgroups == "off":
        monkeypatch.setenv("WORKSHOP_SANDBOX_CGROUPS", "off")
    (tmp_path / "gpu_handler.py").write_text(GPU_HANDLER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    done = run_child("gpu_handler", {}, timeout_s=120, gpu=True)
    assert done.ok and done.answer == {"finite": True, "doubled": float(2 << 20)}, (done.message, done.stderr)
    over = settings.child_memory_bytes() // (1 << 30) + 4
    done = run_child("gpu_handler", {"touch_gib": over}, timeout_s=120, gpu=True)
    assert "touched" not in done.answer, done.answer
