"""The class leaderboard of a model-engine assignment (`gradebook.leaderboard`, ``workshop leaderboard``) and the
machine's kernels graded from a folder (`workshop.grade_folder`, ``workshop grade-folder``), on results of real
gradings on the CPU (the capstone's attention block at its small sizes: the CPU path, whose times say nothing of a
GPU): three students in a gradebook (the reference twice, a known-wrong solution), their results stored in
autograded notebooks as the trusted grader stores them, the vendor library's attention and a folder of AI-written
kernels. Then the public page and a student's own page in headless Chromium."""
from __future__ import annotations

import csv
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_notebook
from test_browser import CHROMIUM, Browser
from timed_results import graded_cell

from gradebook import leaderboard
from gradebook.database import alembic_on_path
from gradebook.graded_on import KEY, graded_on
from graders import tracks
from graders.model_engine.grade import grade_model
from graders.model_engine.source import ModelSource
from workshop import cli, grade_folder

ASSIGNMENT = "capstone"
PROBLEM = "attention_block"
TRACK = tracks.get(ASSIGNMENT)
REFERENCE = (TRACK.solutions / f"{PROBLEM}.py").read_text()
WRONG = TRACK.solutions / "wrong" / "attention_no_causal_mask.py"
RETURNS_INPUT = REFERENCE.replace("return self.out(y.transpose(1, 2).reshape(B, T, C))", "return x")
QUICK = {"device": "cpu", "trials": 3, "timed_runs": 3}
STUDENTS = {"alice": REFERENCE, "bob": WRONG.read_text(), "carol": REFERENCE}


def _autograded(course: Path, student: str, results: list[dict]) -> None:
    """``student``'s autograded notebook as the trusted grader and `gradebook.graded_on` leave it."""
    nb = new_notebook(cells=[graded_cell(f"{PROBLEM}_score", results)])
    nb.metadata[KEY] = {"graded_on": graded_on(ASSIGNMENT)}
    folder = course / "autograded" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / f"{ASSIGNMENT}.ipynb"))


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course whose gradebook has `STUDENTS`' submissions, each graded once, and a folder of AI kernels graded
    by ``workshop grade-folder``; then ``workshop leaderboard``."""
    root = tmp_path_factory.mktemp("leaderboard") / "course"
    root.mkdir()
    alembic_on_path()
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_assignment(ASSIGNMENT)
        gb.add_notebook(ASSIGNMENT, ASSIGNMENT)
        for student, cell in STUDENTS.items():
            gb.add_student(student)
            gb.add_submission(ASSIGNMENT, student)
            _autograded(root, student, [grade_model(ASSIGNMENT, PROBLEM, ModelSource(cell), **QUICK).as_dict()])
    ai = root / "from-a-model"
    (ai / PROBLEM).mkdir(parents=True)
    (ai / PROBLEM / "model-a.py").write_text(REFERENCE)
    (ai / PROBLEM / "model-b.py").write_text(RETURNS_INPUT)
    (ai / PROBLEM / "model-c.py").write_text("import os\n" + REFERENCE)
    (ai / PROBLEM / "huge.py").write_text("#" * (grade_folder.MAX_FILE_BYTES + 1))
    (ai / PROBLEM / "link.py").symlink_to(ai / PROBLEM / "model-a.py")
    (ai / "matmul").mkdir()
    (ai / "notes.txt").write_text("not a submission")
    assert cli.main(["grade-folder", ASSIGNMENT, str(ai), "--device", "cpu", "--course", str(root)]) == 0
    assert cli.main(["grade-folder", ASSIGNMENT, str(TRACK.folder / "vendor"), "--kind", "vendor", "--device", "cpu",
                     "--course", str(root)]) == 0
    assert cli.main(["leaderboard", ASSIGNMENT, "--course", str(root)]) == 0
    return root


def _record(course: Path, author: str) -> leaderboard.Entry:
    record = course / "machine-kernels" / ASSIGNMENT / PROBLEM / f"{author}.json"
    return leaderboard.Entry.from_json(record.read_text())


def _entries(course: Path) -> list[leaderboard.Entry]:
    return (leaderboard.student_entries(course, ASSIGNMENT, f"sqlite:///{course / 'gradebook.db'}")
            + leaderboard.machine_entries(course / "machine-kernels" / ASSIGNMENT, ASSIGNMENT))


def test_grade_folder_grades_each_file_as_a_submission_and_skips_what_is_none(course, capsys):
    records = sorted(p.stem for p in (course / "machine-kernels" / ASSIGNMENT / PROBLEM).iterdir())
    assert records == ["huge", "model-a", "model-b", "model-c", "sdpa"]
    assert _record(course, "model-a").ok and _record(course, "model-a").kind == "ai"
    assert "shares memory with its input" in _record(course, "model-b").reason
    assert _record(course, "sdpa").ok and _record(course, "sdpa").kind == "vendor"
    assert "os is not importable" in _record(course, "model-c").reason
    assert f"at most {grade_folder.MAX_FILE_BYTES} (the cap on a submission's file)" in _record(course, "huge").reason
    found = {f.path.name: f.skipped for f in grade_folder.find(course / "from-a-model", {PROBLEM, "swiglu_mlp"})}
    assert "links are not followed" in found["link.py"] and "no problem 'matmul'" in found["matmul"]
    assert "not in a problem's folder" in found["notes.txt"]


def test_a_student_result_is_read_into_the_records_form(course):
    alice, = [e for e in _entries(course) if e.author == "alice"]
    machine = _record(course, "model-a")
    assert alice.kind == "student" and alice.gpu == "cpu" and alice.graded_at
    assert set(alice.result) == set(machine.result) and alice.result["test"] == machine.result["test"] == PROBLEM


def test_grade_folder_caps_how_many_entries_it_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(grade_folder, "MAX_FILES", 3)
    (tmp_path / PROBLEM).mkdir()
    for n in range(3):
        (tmp_path / PROBLEM / f"k{n}.py").write_text("")
    assert cli.main(["grade-folder", ASSIGNMENT, str(tmp_path), "--device", "cpu", "--to", str(tmp_path)]) == 2
    assert "more than 3 entries; grade-folder reads at most 3 (its cap on one folder)" in capsys.readouterr().err


def test_only_correct_submissions_are_ranked_by_speedup_beside_the_baseline(course):
    board = leaderboard.board(PROBLEM, _entries(course))
    assert board.baseline == "eager"   # torch.compile is not timed on the CPU
    assert {(r.author, r.kind) for r in board.rows} == {
        ("alice", "student"), ("carol", "student"), ("model-a", "ai"), ("sdpa", "vendor"), ("PyTorch eager", "eager")}
    speedups = [r.speedup for r in board.rows]
    assert speedups == sorted(speedups, reverse=True) and [r.rank for r in board.rows] == [1, 2, 3, 4, 5]
    eager, = [r for r in board.rows if r.kind == "eager"]
    assert eager.speedup == 1.0 and eager.gradings == 4
    alice, = [r for r in board.rows if r.author == "alice"]
    entry, = [e for e in _entries(course) if e.author == "alice"]
    assert alice.speedup == entry.result["timing"]["speedup"]["eager"]
    assert {(e.author, e.result["status"]) for e in board.excluded} == {
        ("bob", "incorrect"), ("model-b", "incorrect"), ("model-c", "refused"), ("huge", "refused")}
    bob, = [e for e in board.excluded if e.author == "bob"]
    assert "trial 1" in bob.reason


def test_the_public_page_names_no_student_and_no_reason(course):
    page = (course / "leaderboard" / ASSIGNMENT / "index.html").read_text()
    key = leaderboard.course_key(course)
    for student in STUDENTS:
        assert student not in page
    assert leaderboard.pseudonym(key, "alice") in page and leaderboard.pseudonym(key, "bob") not in page
    assert "trial 1" not in page and "1 student submission(s)" in page and "3 machine kernel(s)" in page
    assert leaderboard.pseudonym(key, "alice") != leaderboard.pseudonym(b"another course", "alice")


def test_each_student_has_an_own_page_that_cannot_be_listed(course):
    key = leaderboard.course_key(course)
    own = course / "leaderboard" / ASSIGNMENT / "you"
    assert own.stat().st_mode & 0o777 == 0o711 and (course / leaderboard.KEY_FILE).stat().st_mode & 0o777 == 0o600
    bob = (own / f"{leaderboard.page_token(key, ASSIGNMENT, 'bob')}.html").read_text()
    assert "Your submission is not ranked: " in bob and "trial 1" in bob
    carol = (own / f"{leaderboard.page_token(key, ASSIGNMENT, 'carol')}.html").read_text()
    assert "trial 1" not in carol and f"you ({leaderboard.pseudonym(key, 'carol')})" in carol
    assert sorted(p.name for p in own.iterdir()) == sorted(
        f"{leaderboard.page_token(key, ASSIGNMENT, s)}.html" for s in STUDENTS)


def test_the_csv_has_every_row_with_who_and_why(course):
    with (course / f"leaderboard-{ASSIGNMENT}.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    mine = [r for r in rows if r["problem"] == PROBLEM]
    assert len(mine) == 9 and {r["student_id"] for r in mine} == {"alice", "bob", "carol", ""}
    bob, = [r for r in mine if r["student_id"] == "bob"]
    assert bob["rank"] == "" and "trial 1" in bob["reason"] and bob["page"].startswith("you/")
    assert [r["rank"] for r in mine if r["rank"]] == ["1", "2", "3", "4", "5"]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_ranking_and_a_students_own_row_read_in_a_browser(course, tmp_path):
    folder = course / "leaderboard" / ASSIGNMENT
    key = leaderboard.course_key(course)
    rows = f"""[...document.querySelectorAll('section[data-problem="{PROBLEM}"] tbody tr')].map(tr => ({{
        rank: +tr.dataset.rank, name: tr.dataset.name, you: tr.classList.contains('you'),
        speedup: parseFloat(tr.cells[3].innerText)}}))"""
    browser = Browser(tmp_path, 1024, 768)
    try:
        browser.open((folder / "index.html").as_uri())
        public = browser.evaluate(rows)
        assert [r["rank"] for r in public] == [1, 2, 3, 4, 5] and not any(r["you"] for r in public)
        assert [r["speedup"] for r in public] == sorted((r["speedup"] for r in public), reverse=True)
        assert {"PyTorch eager", "sdpa", "model-a"} <= {r["name"] for r in public}
        browser.open((folder / "you" / f"{leaderboard.page_token(key, ASSIGNMENT, 'alice')}.html").as_uri())
        mine = [r for r in browser.evaluate(rows) if r["you"]]
        assert [r["name"] for r in mine] == [f"you ({leaderboard.pseudonym(key, 'alice')})"]
        said = browser.evaluate(f"document.querySelector('section[data-problem=\"{PROBLEM}\"] .yours').innerText")
        assert said.startswith(f"Your rank: {mine[0]['rank']} of 5")
        assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        browser.open((folder / "you" / f"{leaderboard.page_token(key, ASSIGNMENT, 'bob')}.html").as_uri())
        assert "trial 1" in browser.evaluate("document.querySelector('.excluded.mine').innerText")
    finally:
        browser.close()
