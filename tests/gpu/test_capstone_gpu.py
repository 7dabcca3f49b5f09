"""The capstone on a real GPU, at the problems' own sizes, as the TA runs it: one ``workshop grade`` of a class (the
references, and a student handing in the three known-wrong solutions), the vendor library's attention graded by
``workshop grade-folder --kind vendor``, then ``workshop leaderboard``: each problem's ranking over
``torch.compile`` holds the reference, eager, ``torch.compile`` (and the vendor attention), the known-wrong ones
excluded with their reason on their author's page only; the pages read in headless Chromium where it is installed.
Records every row (speed-ups, times, GPU) under benchmarks/results/capstone/ (``capstone-leaderboard-gpu-<date-time>
.json``), and the references' speed-ups over ``torch.compile`` (``capstone-<date-time>.json``, with the track's
measuring code), which ``workshop targets capstone RECORD`` reads."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from markupsafe import escape
from e2e.test_browser import CHROMIUM, Browser

from gradebook import leaderboard
from graders import tracks
from graders.gpu import detect_gpu
from graders.model_engine.spec import load_model_spec
from workshop import cli
from workshop.course import Course
from workshop.export import gradebook_url
from workshop.records import model_row, write_gpu_record

pytestmark = pytest.mark.gpu
TRACK = tracks.get("capstone")
SPEC = load_model_spec("capstone")
WRONG = {tracks.graded_kernel(p).removesuffix("_score"): p for p in TRACK.wrong_solutions()}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    made = Course(tmp_path_factory.mktemp("capstone-gpu") / "course", TRACK.name)
    made.submit("reference", {pid: p.reference.read_text() for pid, p in SPEC.problems.items()})
    made.submit("wrong", {pid: path.read_text() for pid, path in WRONG.items()})
    assert cli.main(["grade", TRACK.name, "--course", str(made.root)]) == 0
    references = [e for e in leaderboard.student_entries(made.root, TRACK.name, gradebook_url(made.root))
                  if e.author == "reference"]
    kernels = {e.problem: model_row(e.result, SPEC.problem(e.problem).sizes) for e in references}
    print(f"\nthe references: {kernels}")
    write_gpu_record(TRACK.name, "the capstone references' speed-ups, graded by workshop grade at the problems' sizes",
                     {"kernels": kernels}, dists=("triton", "torch"), track=TRACK.name)   # before the slow rest
    assert cli.main(["grade-folder", TRACK.name, str(TRACK.folder / "vendor"), "--kind", "vendor",
                     "--course", str(made.root)]) == 0
    assert cli.main(["leaderboard", TRACK.name, "--course", str(made.root)]) == 0
    with (made.root / f"leaderboard-{TRACK.name}.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    write_gpu_record("capstone-leaderboard-gpu", "workshop grade of a capstone class (the references, the known-wrong "
                     "solutions), the vendor attention by workshop grade-folder, then workshop leaderboard: every row "
                     "at the problems' sizes", {"rows": rows}, dists=("nbgrader", "triton", "torch"),
                     folder=TRACK.name)
    return made.root


def _boards(root: Path) -> dict[str, leaderboard.Board]:
    entries = leaderboard.student_entries(root, TRACK.name, gradebook_url(root))
    entries += leaderboard.machine_entries(root / "machine-kernels" / TRACK.name, TRACK.name)
    return {b.problem: b for b in leaderboard.boards(TRACK.name, entries)}


def test_each_ranking_holds_the_reference_and_the_baselines_over_torch_compile(course):
    gpu = detect_gpu().name
    for problem, board in _boards(course).items():
        print(problem, [(r.rank, r.author, round(r.speedup, 3), round(r.median_ms, 4)) for r in board.rows])
        assert board.baseline == "compile" and board.gpus == [gpu], (problem, board.baseline, board.gpus)
        who = {(r.author, r.kind) for r in board.rows}
        assert {("reference", "student"), ("PyTorch eager", "eager"), ("torch.compile", "compile")} <= who
        assert (("sdpa", "vendor") in who) == (problem == "attention_block")
        compiled, = [r for r in board.rows if r.kind == "compile"]
        assert compiled.speedup == 1.0


def test_each_known_wrong_solution_is_excluded_with_its_reason_on_its_authors_page_only(course):
    key = leaderboard.course_key(course)
    pages = course / "leaderboard" / TRACK.name
    public = (pages / "index.html").read_text()
    own = (pages / "you" / f"{leaderboard.page_token(key, TRACK.name, 'wrong')}.html").read_text()
    for problem, board in _boards(course).items():
        excluded, = board.excluded
        assert excluded.author == "wrong" and excluded.result["status"] in tracks.expected_statuses(WRONG[problem])
        reason = str(escape(excluded.reason))
        assert reason in own and reason not in public


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_pages_read_in_a_browser(course, tmp_path):
    key = leaderboard.course_key(course)
    pages = course / "leaderboard" / TRACK.name
    rows = """[...document.querySelectorAll('section tbody tr')].map(tr => ({
        problem: tr.closest('section').dataset.problem, rank: +tr.dataset.rank, you: tr.classList.contains('you')}))"""
    browser = Browser(tmp_path, 1024, 768)
    try:
        browser.open((pages / "index.html").as_uri())
        public = browser.evaluate(rows)
        assert {r["problem"] for r in public} == set(SPEC.problems) and not any(r["you"] for r in public)
        browser.open((pages / "you" / f"{leaderboard.page_token(key, TRACK.name, 'reference')}.html").as_uri())
        assert sorted(r["problem"] for r in browser.evaluate(rows) if r["you"]) == sorted(SPEC.problems)
    finally:
        browser.close()
