"""The debugging track (L7) without a GPU: every kernel (sabotaged, reference fix, known-wrong fix) compiles with
NVRTC as the spec launches it; the release keeps each sabotaged kernel and a ``None`` for each answer; each line the
key names is the line the statement numbers; the deep-read's key is what the Nsight Compute records say; the
diagnosis and deep-read answers graded through the trusted path in this process (the reference full, the stub 0, a
file of guesses its ``expect:`` points); the check cell without a GPU; the graded cell's public part without the
CPU preview; and on the CPU preview, each fix right and each sabotaged kernel wrong where its bug shows. The fixes
graded on a GPU, the tools catching each bug and the hang bounded: tests/gpu/test_debugging_gpu.py."""
from __future__ import annotations

import logging
import re

import nbformat
import pytest
from nbgrader.preprocessors import ClearSolutions
from nbgrader.utils import is_grade, is_solution
from traitlets.config import Config

from graders import autograde, settings, tracks
from graders.cuda_engine import grade, sanitizer
from graders.cuda_engine.compile import DEFAULT_ARCH, CompileError, compile_cuda
from graders.cuda_engine.spec import load_spec
from graders.notebook import EDIT_LANGUAGE, EDIT_STUB
from graders.quiz_engine.grade import answer_key
from graders.submission import Submission
from workshop import submissions
from workshop.cells import read_cells

TRACK = tracks.get("debugging")
SPEC = load_spec("debugging")
PROBLEM = TRACK.problem_module()
QUESTIONS = {q.id: q for q in PROBLEM.QUESTIONS}


def _sources() -> dict[str, tuple[str, str]]:
    """label -> (kernel id, source): each sabotaged kernel, each reference fix, each known-wrong fix."""
    found = {f"{kid}/sabotaged": (kid, PROBLEM.SABOTAGED[kid]) for kid in SPEC.kernels}
    found |= {f"{kid}/reference": (kid, k.reference.read_text()) for kid, k in SPEC.kernels.items()}
    found |= {f"{tracks.graded_kernel(p)}/{p.stem}": (tracks.graded_kernel(p), p.read_text())
              for p in TRACK.wrong_solutions()}
    return found


SOURCES = _sources()


@pytest.mark.parametrize("label", list(SOURCES))
def test_every_kernel_compiles_with_nvrtc_as_the_spec_launches_it_unless_it_is_the_compile_error(label):
    kid, source = SOURCES[label]
    kernel = SPEC.kernel(kid)
    build = lambda: compile_cuda(source, kernels=(kernel.function,), defines=kernel.geometry.defines(),
                                 arch=DEFAULT_ARCH)
    if label.endswith("/compile_error"):
        with pytest.raises(CompileError, match=r'line \d+: error: identifier "m" is undefined'):
            build()
    else:
        assert build().resources[kernel.function].spill_stores == 0


def test_the_grader_runs_the_shapes_and_tools_that_show_each_bug_and_the_check_cell_a_shape_that_does_not():
    public = {kid: sanitizer.public_shape(k, k.geometry) for kid, k in SPEC.kernels.items()}
    assert public == {"reduce": (4, 1000), "copy": (4, 1024), "softmax": (4, 1000), "chunked": (4, 1024)}
    for kernel in SPEC.kernels.values():
        assert kernel.sanitizer_tools == ("memcheck", "racecheck", "initcheck", "synccheck")
    # the race: racecheck at more columns than the known-wrong fix keeps its barrier for (1024)
    assert sanitizer.sanitize_shape(SPEC.kernel("reduce"), SPEC.kernel("reduce").geometry) == (3, 4097)
    # the misaligned float4: rows after the first start off a 16-byte boundary where cols is not a multiple of 4
    copy = SPEC.kernel("copy")
    assert [s for s in copy.check_shapes if s[0] > 1 and s[1] % 4] == [(5, 1001), (64, 4099)]
    assert copy.sanitize_shape == (5, 1001)
    # the hang: a row whose last chunk ends 1 to 31 columns into a block of 256
    chunked = SPEC.kernel("chunked")
    assert [s for s in chunked.check_shapes if 0 < s[1] % 256 < 32] == [(1, 1), (5, 4099)]


def test_a_row_sum_is_right_within_its_tolerance_of_the_rows_magnitude():
    import torch
    x = PROBLEM.ROW_SUM.make_inputs((3, 1000), torch.Generator().manual_seed(0))
    expected = PROBLEM.ROW_SUM.reference(x)
    bound = PROBLEM.ROW_SUM_RTOL * expected.magnitude
    assert PROBLEM.row_sum_mismatch((expected.exact + 0.99 * bound).float(), expected) == ""
    out = (expected.exact + torch.tensor([0.0, 1.01, 0.0], dtype=torch.float64) * bound).float()
    assert PROBLEM.row_sum_mismatch(out, expected).startswith("1 of 3 row sums wrong; first out[1]: expected ")
    out = expected.exact.float()
    out[2] = float("nan")
    assert PROBLEM.row_sum_mismatch(out, expected).startswith("1 of 3 row sums wrong; first out[2]")
    stale = expected.exact.float() - x[0][:, 0]   # one element lost, as a racing tree loses it
    assert PROBLEM.row_sum_mismatch(stale, expected).startswith("3 of 3")


def _released() -> nbformat.NotebookNode:
    """The source notebook as nbgrader's ClearSolutions releases it, with nbgrader_config.py's stub."""
    nb = nbformat.read(str(TRACK.notebook_path), as_version=4)
    assert nb.metadata.kernelspec.language == EDIT_LANGUAGE
    config = Config()
    config.ClearSolutions.code_stub = {EDIT_LANGUAGE: EDIT_STUB}
    released, _ = ClearSolutions(config=config).preprocess(nb, {"language": EDIT_LANGUAGE})
    return released


def test_the_release_keeps_each_sabotaged_kernel_and_none_for_each_answer():
    cells = {c.metadata.nbgrader["grade_id"]: c for c in _released().cells if is_solution(c)}
    assert set(cells) == set(SPEC.kernels) | set(QUESTIONS)
    for grade_id, cell in cells.items():
        assert cell.source.endswith(f"\n{EDIT_STUB}") and "BEGIN SOLUTION" not in cell.source
        namespace: dict = {}
        exec(cell.source, namespace)
        if grade_id in SPEC.kernels:
            assert namespace[f"{grade_id}_src"].strip() == PROBLEM.SABOTAGED[grade_id].strip()
        else:
            assert namespace[grade_id] is None


def test_each_line_the_key_names_is_the_line_the_statement_numbers():
    text = "\n".join(c.source for c in TRACK.build_notebook().cells if c.cell_type == "markdown")
    planted = {"reduce": "if (s > 32) __syncthreads();", "copy": "dst[i] = src[i];",
               "softmax": "const float e = expf(in[c]);", "chunked": "            __syncthreads();"}
    for kid, line in planted.items():
        number = answer_key("debugging")[f"{kid}_line"]
        numbered = PROBLEM.SABOTAGED[kid].split("\n")[number - 1]
        assert line in numbered and f"\n{number:>2}  {numbered}\n" in text, kid
    # the fix changes the line the key names, except the copy's, whose fix changes the pointers that line reads
    for kid, line in planted.items():
        assert (line in SPEC.kernel(kid).reference.read_text()) == (kid == "copy"), kid


def _metric(record: str, kernel: str, name: str) -> float:
    """A metric of the first launch of ``kernel`` in an ncu record, as printed."""
    text = (settings.ROOT / "benchmarks" / "results" / record).read_text()
    block = text[text.index(f"  {kernel} ("):]
    found = re.search(rf"^\s+{re.escape(name)}\s+(?:[^\d\s]\S*\s+)?([\d.,]+)$", block, re.MULTILINE)
    return float(found[1].replace(",", ""))


def test_the_deep_reads_key_is_what_the_records_say():
    key = answer_key("debugging")
    for prefix, (record, kernel, _) in PROBLEM.NCU_RECORDS.items():
        assert key[f"{prefix}_occupancy"]({}) == _metric(record, kernel, "Achieved Occupancy")
        assert key[f"{prefix}_dram"]({}) == pytest.approx(_metric(record, kernel, "DRAM Throughput") / 100)
        memory, compute = (_metric(record, kernel, m) for m in ("Memory Throughput", "Compute (SM) Throughput"))
        # ncu's rule: both under 60% of peak "typically indicate latency issues"
        assert key[f"{prefix}_limit"] == ("c" if max(memory, compute) < 60 else "a" if memory > compute else "b")
    assert _metric(*PROBLEM.NCU_RECORDS["gemm"][:2], "Block Limit Registers") == 1
    assert _metric(*PROBLEM.NCU_RECORDS["tc"][:2], "Block Limit Registers") == 2
    assert (_metric(*PROBLEM.NCU_RECORDS["decode"][:2], "Theoretical Occupancy"),
            _metric(*PROBLEM.NCU_RECORDS["decode"][:2], "Waves Per SM")) == (75, 0.65)


def trusted_points(answers: dict[str, str], student: str) -> dict[str, float]:
    """The answer cells' points as the trusted grader grades ``answers`` (its path, in this process; the kernels'
    cells, which need a GPU, left out)."""
    nb = submissions.fill(nbformat.read(str(TRACK.notebook_path), as_version=4), answers)
    cells = [c for c in autograde.graded_cells(nb) if c.metadata.nbgrader["grade_id"].removesuffix("_score")
             in QUESTIONS]
    grading = autograde._Grading(cells, Submission(nb), 2, logging.getLogger("debugging"), time_limit=60,
                                 student=student)
    grading.finish()
    points = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"] for c in nb.cells if is_grade(c)}
    return {gid: 0.0 if any(o.output_type == "error" for o in outputs) else points[gid]
            for gid, outputs in grading.outputs.items()}


FULL = {f"{qid}_score": float(q.points) for qid, q in QUESTIONS.items()}


def test_the_answers_graded_through_the_trusted_path_reference_full_stub_zero_guesses_their_expect_points():
    reference = {gid: source for gid, source in submissions.cuda_answers("debugging").items() if gid in QUESTIONS}
    assert trusted_points(reference, "alice") == FULL
    assert trusted_points({qid: f"{qid} = None\n{EDIT_STUB}" for qid in QUESTIONS}, "stub") == dict.fromkeys(FULL, 0)
    guesses = TRACK.solutions / "diagnosis_guesses.py"
    expected = tracks.expected_points(guesses)
    points = trusted_points(reference | read_cells(guesses), "bob")
    assert {gid: p for gid, p in points.items() if gid in expected} == dict.fromkeys(expected, 0.0)
    assert {gid: p for gid, p in points.items() if gid not in expected} == {
        gid: p for gid, p in FULL.items() if gid not in expected}


def test_a_handed_in_kernel_replaces_the_cells_last_source_the_one_that_counts():
    wrong = TRACK.solutions / "wrong" / "nan_to_zero.cu"
    cell = submissions.cuda_answers("debugging", {"softmax": wrong.read_text()})["softmax"]
    namespace: dict = {}
    exec(cell, namespace)
    assert namespace["softmax_src"].strip() == wrong.read_text().strip()
    assert cell.count('softmax_src = r"""') == 2 and PROBLEM.SABOTAGED["softmax"].strip() in cell


def test_the_check_cell_without_a_gpu_compiles_and_points_to_the_feedback(monkeypatch, capsys):
    monkeypatch.setattr("graders.gpu.detect_gpu", lambda: None)
    monkeypatch.setattr(grade, "detect_gpu", lambda: None)
    sanitizer.check("debugging", "reduce", PROBLEM.SABOTAGED["reduce"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("block_sum compiles for sm_")
    assert lines[1:] == ["? reduce: no GPU here, so compute-sanitizer cannot run; your feedback shows what the "
                         "grader's tools (memcheck, racecheck, initcheck, synccheck) found on the GPU worker"]
    sanitizer.check("debugging", "softmax", (TRACK.solutions / "wrong" / "compile_error.cu").read_text())
    assert capsys.readouterr().out.startswith("✗ softmax: Your CUDA code did not compile")


def test_the_public_part_of_a_graded_cell_runs_no_cpu_preview(monkeypatch, capsys):
    """The sabotaged race passes it (the bug is the GPU tools' to find); the same call with the preview fails it
    where g++ is here."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "")
    monkeypatch.setattr(grade, "detect_gpu", lambda: None)
    grade.assert_compiles("debugging", "reduce", PROBLEM.SABOTAGED["reduce"], preview=False)
    assert capsys.readouterr().out == ("✓ reduce compiles; correctness and speed are checked on the GPU worker.\n")
    from graders.cuda_engine import preview
    if preview.toolchain() is None:
        pytest.skip("no g++ here for the CPU preview")
    with pytest.raises(grade.KernelFailed, match="reduce: CPU preview, shape .*: a race"):
        grade.assert_compiles("debugging", "reduce", PROBLEM.SABOTAGED["reduce"])


# The CPU preview (graders/cuda_engine/preview.py: threads one at a time between barriers, in two orders) off the
# notebook's cells but here: each reference fix right at the shapes that show its bug, each sabotaged kernel wrong
# there for the reason its bug gives (the float4's misalignment shows as an access outside every buffer: the
# emulation's memory is not the GPU's, but the access is as far off).
PREVIEWED = {"reduce": ((2, 4097), "race"), "copy": ((5, 1001), "out_of_bounds"),
             "softmax": ((4, 1000), "incorrect"), "chunked": ((1, 1), "deadlock")}


@pytest.mark.parametrize("kernel_id", list(PREVIEWED))
def test_on_the_cpu_preview_the_fix_is_right_and_the_sabotaged_kernel_wrong_where_the_bug_shows(kernel_id):
    from graders.cuda_engine import preview
    if preview.toolchain() is None:
        pytest.skip("no g++ here for the CPU preview")
    kernel = SPEC.kernel(kernel_id)
    shape, finding = PREVIEWED[kernel_id]
    fixed = preview.run_preview(kernel, kernel.geometry, kernel.reference.read_text(), [shape], time_limit_s=5)
    assert fixed.verdict == "correct", fixed.line
    broken = preview.run_preview(kernel, kernel.geometry, PROBLEM.SABOTAGED[kernel_id], [shape], time_limit_s=5)
    assert (broken.verdict, broken.finding) == ("wrong", finding), broken.line
