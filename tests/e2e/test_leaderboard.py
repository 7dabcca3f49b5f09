"""The class leaderboard of a model-engine assignment (`gradebook.leaderboard`, ``workshop leaderboard``) and the
machine's kernels graded from a folder (`workshop.grade_folder`, ``workshop grade-folder``), after one real
``workshop grade`` of a capstone class on the CPU (``WORKSHOP_TARGET=sim``: the attention block at its small
sizes, whose times say nothing of a GPU): the reference and a known-wrong solution handed in through
nbgrader, the vendor library's attention and a folder of AI-written kernels beside them. Then the public page and
students' own pages in headless Chromium."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from nbgrader_course import CourseCopy
from test_browser import CHROMIUM, Browser

from gradebook import leaderboard
from graders import tracks
from workshop import cli, grade_folder

ASSIGNMENT = "capstone"
PROBLEM = "attention_block"
TRACK = tracks.get(ASSIGNMENT)
REFERENCE = (TRACK.solutions / f"{PROBLEM}.py").read_text()
WRONG = TRACK.solutions / "wrong" / "attention_no_causal_mask.py"
RETURNS_INPUT = REFERENCE.replace("return self.out(y.transpose(1, 2).reshape(B, T, C))", "return x")
STUDENTS = {"alice": REFERENCE, "bob": WRONG.read_text()}   # the other problems' cells: the release's stubs


@pytest.fixture(scope="module")
def course(released, tmp_path_factory) -> Path:
    """`STUDENTS`' submissions graded by ``workshop grade``, the vendor kernel and a folder of AI kernels by
    ``workshop grade-folder``; then ``workshop leaderboard``."""
    copy = CourseCopy(released[ASSIGNMENT], tmp_path_factory.mktemp("leaderboard") / "course", ASSIGNMENT)
    root = copy.root
    for student, cell in STUDENTS.items():
        copy.submit(student, {PROBLEM: cell})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKSHOP_TARGET", "sim")   # read by the grading's trusted grader
        patch.delenv("WORKSHOP_BROKER_URL", raising=False)   # graded here
        assert cli.main(["grade", ASSIGNMENT, "--course", str(root)]) == 0
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


@pytest.mark.slow
def test_grade_folder_grades_each_file_as_a_submission_and_skips_what_is_none(course):
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


@pytest.mark.slow
def test_a_student_result_is_read_into_the_records_form(course):
    alice, = [e for e in _entries(course) if e.author == "alice"]
    machine = _record(course, "model-a")
    assert alice.kind == "student" and alice.gpu == "cpu" and alice.graded_at
    assert set(alice.result) == set(machine.result) and alice.result["test"] == machine.result["test"] == PROBLEM


def test_grade_folder_caps_its_entries_and_both_commands_take_model_tracks_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(grade_folder, "MAX_FILES", 3)
    (tmp_path / PROBLEM).mkdir()
    for n in range(3):
        (tmp_path / PROBLEM / f"k{n}.py").write_text("")
    assert cli.main(["grade-folder", ASSIGNMENT, str(tmp_path), "--device", "cpu", "--to", str(tmp_path)]) == 2
    assert "more than 3 entries; grade-folder reads at most 3 (its cap on one folder)" in capsys.readouterr().err
    assert cli.main(["leaderboard", "puzzles", "--course", str(tmp_path)]) == 2
    assert "puzzles is a numba track" in capsys.readouterr().err


@pytest.mark.slow
def test_only_correct_submissions_are_ranked_by_speedup_beside_the_baseline(course):
    board = leaderboard.board(PROBLEM, _entries(course))
    assert board.baseline == "eager"   # torch.compile is not timed on the CPU
    assert {(r.author, r.kind) for r in board.rows} == {
        ("alice", "student"), ("model-a", "ai"), ("sdpa", "vendor"), ("PyTorch eager", "eager")}
    speedups = [r.speedup for r in board.rows]
    assert speedups == sorted(speedups, reverse=True) and [r.rank for r in board.rows] == [1, 2, 3, 4]
    eager, = [r for r in board.rows if r.kind == "eager"]
    assert eager.speedup == 1.0 and eager.gradings == 3
    alice, = [r for r in board.rows if r.author == "alice"]
    entry, = [e for e in _entries(course) if e.author == "alice"]
    assert alice.speedup == entry.result["timing"]["speedup"]["eager"]
    assert {(e.author, e.result["status"]) for e in board.excluded} == {
        ("bob", "incorrect"), ("model-b", "incorrect"), ("model-c", "refused"), ("huge", "refused")}
    bob, = [e for e in board.excluded if e.author == "bob"]
    assert "trial 1" in bob.reason
    alice_fast = entry.result["fast_p"]["eager"]["1.0"]   # KernelBench's fast_p: bob counts, never fast
    assert board.fast["student"] == {1.0: (int(alice_fast), 2), 1.5: (int(entry.result["fast_p"]["eager"]["1.5"]), 2)}
    assert board.fast["ai"][1.0][1] == 4 and "vendor" not in board.fast


@pytest.mark.slow
def test_the_public_page_names_no_student_and_no_reason(course):
    page = (course / "leaderboard" / ASSIGNMENT / "index.html").read_text()
    key = leaderboard.course_key(course)
    for student in STUDENTS:
        assert student not in page
    assert leaderboard.pseudonym(key, "alice") in page and leaderboard.pseudonym(key, "bob") not in page
    assert "trial 1" not in page and "1 student submission(s)" in page and "3 machine kernel(s)" in page
    assert leaderboard.pseudonym(key, "alice") != leaderboard.pseudonym(b"another course", "alice")
    named = leaderboard.render(ASSIGNMENT, leaderboard.boards(ASSIGNMENT, _entries(course)), key, anonymous=False)
    assert 'data-name="alice"' in named and leaderboard.pseudonym(key, "alice") not in named


@pytest.mark.slow
def test_each_student_has_an_own_page_that_cannot_be_listed(course):
    key = leaderboard.course_key(course)
    own = course / "leaderboard" / ASSIGNMENT / "you"
    assert own.stat().st_mode & 0o777 == 0o711 and (course / leaderboard.KEY_FILE).stat().st_mode & 0o777 == 0o600
    bob = (own / f"{leaderboard.page_token(key, ASSIGNMENT, 'bob')}.html").read_text()
    assert "Your submission is not ranked: " in bob and "trial 1" in bob
    alice = (own / f"{leaderboard.page_token(key, ASSIGNMENT, 'alice')}.html").read_text()
    assert "trial 1" not in alice and f"you ({leaderboard.pseudonym(key, 'alice')})" in alice
    assert sorted(p.name for p in own.iterdir()) == sorted(
        f"{leaderboard.page_token(key, ASSIGNMENT, s)}.html" for s in STUDENTS)


@pytest.mark.slow
def test_the_csv_has_every_row_with_who_and_why_beside_the_grade_csv(course):
    with (course / f"leaderboard-{ASSIGNMENT}.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert {r["problem"] for r in rows} == {PROBLEM}   # the other problems' cells were the release's stubs
    assert len(rows) == 8 and {r["student_id"] for r in rows} == {"alice", "bob", ""}
    bob, = [r for r in rows if r["student_id"] == "bob"]
    assert bob["rank"] == "" and "trial 1" in bob["reason"] and bob["page"].startswith("you/")
    assert [r["rank"] for r in rows if r["rank"]] == ["1", "2", "3", "4"]
    alice, = [r for r in rows if r["student_id"] == "alice"]
    assert cli.main(["export", "--course", str(course)]) == 0
    with (course / "grades-detail.csv").open() as stream:
        grades = {r["student_id"]: r for r in csv.DictReader(stream)}
    assert float(grades["alice"][f"{PROBLEM}_speedup_eager"]) == pytest.approx(float(alice["speedup"]), abs=1e-4)
    assert grades["bob"][f"{PROBLEM}_speedup_eager"] == "" and float(grades["bob"][f"{PROBLEM}_score"]) == 0


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
        assert [r["rank"] for r in public] == [1, 2, 3, 4] and not any(r["you"] for r in public)
        assert [r["speedup"] for r in public] == sorted((r["speedup"] for r in public), reverse=True)
        assert {"PyTorch eager", "sdpa", "model-a"} <= {r["name"] for r in public}
        browser.open((folder / "you" / f"{leaderboard.page_token(key, ASSIGNMENT, 'alice')}.html").as_uri())
        mine = [r for r in browser.evaluate(rows) if r["you"]]
        assert [r["name"] for r in mine] == [f"you ({leaderboard.pseudonym(key, 'alice')})"]
        said = browser.evaluate(f"document.querySelector('section[data-problem=\"{PROBLEM}\"] .yours').innerText")
        assert said.startswith(f"Your rank: {mine[0]['rank']} of 4")
        assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        browser.open((folder / "you" / f"{leaderboard.page_token(key, ASSIGNMENT, 'bob')}.html").as_uri())
        assert "trial 1" in browser.evaluate("document.querySelector('.excluded.mine').innerText")
    finally:
        browser.close()
