"""Hostile submissions through real ``nbgrader autograde`` (puzzles, simulator): each earns exactly what its
honest kernels earn, and leaves the gradebook, the grader's files, the machine and the network as they were.

The payloads are cell files in tests/attacks/ (see their comments); a victim's reference submission is
graded first and must keep its 42 points through every attack.
"""
from __future__ import annotations

import hashlib
import re
import socket
import string
import subprocess
import threading
import uuid
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import is_grade, is_solution
from nbgrader_course import FULL_MARKS, CourseCopy, unmet

from graders.numba_engine import catalogue
from graders.tracks import expected_points
from workshop import course as nbg
from workshop import submissions
from workshop.cells import read_cells
from workshop.course import Course

pytestmark = pytest.mark.slow
ATTACKS = Path(__file__).parent / "attacks"
ROOT = submissions.ROOT
TOTAL = 3 * len(catalogue.PUZZLES)
MARKER = f"kw-attack-{uuid.uuid4().hex[:12]}"


class Listener:
    """A TCP server on 127.0.0.1 that records every connection made to it."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections.append(conn.recv(1 << 16))
            conn.close()


def _fingerprint(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _outputs_of(course: Course, cells: list[str]) -> str:
    """The text the autograded notebook shows for these graded cells (the grader's verdicts)."""
    return "\n".join(f"{c.metadata.nbgrader.grade_id}: " + "".join(o.get("text", "") + "".join(o.get("traceback", []))
                                                                   for o in c.get("outputs", []))
                     for c in course.autograded("victim").cells
                     if is_grade(c) and c.metadata.nbgrader.grade_id in cells)


@pytest.fixture(scope="module")
def course(released_puzzles, tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        # The simulator also on a GPU worker, with the real per-kernel limit: the 5 s of the CPU hang tests is
        # too short for the hidden matmul cases when a 16-core worker grades every puzzle at once.
        env.setenv("WORKSHOP_TARGET", "sim")
        env.setenv("WORKSHOP_KERNEL_TIMEOUT", "30")
        course = CourseCopy(released_puzzles.root, tmp_path_factory.mktemp("attacks") / "course")
        course.submit("victim", submissions.reference_answers())
        course.autograde("victim")
        scores = course.scores("victim")
        assert sum(scores.values()) == TOTAL, _outputs_of(course, [c for c, s in scores.items() if not s])
        yield course


@pytest.fixture(scope="module")
def listener():
    return Listener()


def _answers(name: str, course: Course, listener: Listener) -> dict[str, str]:
    """The reference answers with the attack file's cells swapped in (``ID+`` cells appended to ID's)."""
    answers = submissions.reference_answers()
    fill = {"ROOT": str(ROOT), "COURSE": str(course.root), "PORT": str(listener.port), "MARKER": MARKER}
    for grade_id, source in read_cells(ATTACKS / f"{name}.py").items():
        source = string.Template(source).safe_substitute(fill)
        if grade_id.endswith("+"):
            answers[grade_id[:-1]] += "\n\n" + source
        else:
            answers[grade_id] = source
    return answers


def _test_cells() -> set[str]:
    return {f"{p.id}_{part}" for p in catalogue.PUZZLES for part in FULL_MARKS}


def _grader_files() -> list[Path]:
    return sorted([*ROOT.glob("graders/**/*.py"), *ROOT.glob("tracks/*/*.py"), ROOT / "nbgrader_config.py"])


@pytest.mark.parametrize("attack", ["hostile", "killers"])
def test_attack_earns_only_its_honest_points_and_harms_nothing(course, listener, attack):
    before_files = _fingerprint(_grader_files() + [course.root / "nbgrader_config.py"])
    victim_before = course.scores("victim")

    course.submit(attack, _answers(attack, course, listener))
    course.autograde(attack)

    scores = course.scores(attack)
    assert set(scores) == _test_cells()
    assert not unmet(scores, expected_points(ATTACKS / f"{attack}.py"))
    assert course.scores("victim") == victim_before
    assert _fingerprint(_grader_files() + [course.root / "nbgrader_config.py"]) == before_files
    assert listener.connections == []
    survivors = subprocess.run(["pgrep", "-af", MARKER], capture_output=True, text=True).stdout
    assert survivors == "", f"processes outlived the grading:\n{survivors}"
    outputs = "\n".join(str(c.get("outputs", "")) for c in course.autograded(attack).cells)
    assert "BEGIN SOLUTION" not in outputs and "rewrote" not in outputs
    # a checkout under /tmp lies in the sandbox's private /tmp: a new file written there is the sandbox's own
    appended = re.findall(r"appended to (\S+)", outputs)
    assert not [p for p in appended if not p.startswith("/tmp/")], appended


def test_the_ta_sees_why_a_payload_kernel_scored_nothing(course):
    cells = {c.metadata.nbgrader["grade_id"]: c.outputs for c in course.autograded("hostile").cells if is_grade(c)}
    assert "os.system" in cells["shared_correct"][-1]["evalue"]
    assert "__class__" in cells["pooling_correct"][-1]["evalue"] or "_" in cells["pooling_correct"][-1]["evalue"]
    assert "do not define sum_kernel" in cells["prefix_sum_correct"][-1]["evalue"]


def test_a_package_handed_in_beside_the_notebook_is_never_imported(course):
    """A stub notebook with its own graders/ and puzzles/ packages (and a sitecustomize) beside it."""
    folder = course.submit("shadow", {}).parent
    fake = "def grade_correctness(*a): pass\ndef grade_limits(*a): pass\ndef check(*a): return True\n"
    for package in ("graders", "puzzles"):
        (folder / package).mkdir()
        (folder / package / "__init__.py").write_text(fake)
        (folder / package / "puzzle_grade.py").write_text(fake)
    (folder / "sitecustomize.py").write_text("import builtins; builtins.FORGED = True\n")
    done = nbg.nbgrader(course.root, "autograde", course.assignment, "--student=shadow", "--force", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum(course.scores("shadow").values()) == 0
    assert "Ignored files handed in beside the notebook" in done.stdout + done.stderr
    assert "graders/__init__.py" in done.stdout + done.stderr


def test_forged_cell_metadata_earns_nothing_extra(course):
    """Extra graded cells, a test cell emptied, a solution cell claiming points: nbgrader's own checks and
    the gradebook's copy of every test cell decide."""
    nb = submissions.fill(course.release, submissions.reference_answers())
    bonus = nbformat.v4.new_code_cell("print('bonus')")
    bonus.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "points": 100, "solution": False,
                                  "locked": True, "schema_version": 3}
    nb.cells.append(bonus)
    for cell in filter(is_grade, nb.cells):
        if cell.metadata.nbgrader.grade_id == "map_correct":
            cell.source = "pass"
    for cell in filter(is_solution, nb.cells):
        if cell.metadata.nbgrader.grade_id == "zip":
            cell.source = "@cuda.jit\ndef zip_kernel(out, a, b, size):\n    pass"
            cell.metadata.nbgrader.update(grade=True, points=50)
    submissions.write(course.root, "forger", course.assignment, nb)
    course.add_student("forger", "Forger", "Test")
    nbg.nbgrader(course.root, "autograde", course.assignment, "--student=forger", "--force", check=False)
    scores = course.scores("forger")
    assert set(scores) <= _test_cells()
    assert sum(scores.values()) <= TOTAL - 3
    assert scores.get("zip_correct", 0) == 0


@pytest.fixture(scope="module", autouse=True)
def _no_leftovers():
    yield
    subprocess.run(["pkill", "-f", MARKER], capture_output=True)
