"""Make student submissions from a released notebook and cell files, as a student's saved notebook."""
from __future__ import annotations

import copy
import datetime
import re
import secrets
from pathlib import Path

import nbformat
from nbgrader.utils import is_solution

from graders import settings, tracks
from graders.quiz_engine.grade import right_answer
from graders.quiz_engine.notebook import answer_literal
from workshop.cells import read_cells, strip_solution_markers

ROOT = settings.ROOT
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"   # nbgrader's Exchange.timestamp_format (UTC)
PUZZLE_SOLUTIONS = tracks.get("puzzles").solutions


def fill(release: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of ``release`` whose solution cells named in ``answers`` (by grade_id) hold those sources."""
    nb = copy.deepcopy(release)
    unknown = set(answers)
    for cell in filter(is_solution, nb.cells):
        grade_id = cell.metadata.nbgrader["grade_id"]
        if grade_id in answers:
            cell.source = answers[grade_id]
            unknown.discard(grade_id)
    if unknown:
        raise KeyError(f"no solution cells {sorted(unknown)} in the notebook")
    return nb


def reference_answers() -> dict[str, str]:
    cells = read_cells(PUZZLE_SOLUTIONS / "reference.py")
    cells.pop("setup")
    return {grade_id: strip_solution_markers(src) for grade_id, src in cells.items()}


def wrong_answers(*names: str) -> dict[str, str]:
    """The reference answers with the cells of the named files in tracks/puzzles/solutions/wrong/ swapped in."""
    answers = reference_answers()
    for name in names:
        answers.update(read_cells(PUZZLE_SOLUTIONS / "wrong" / f"{name}.py"))
    return answers


def write(course: Path, student: str, assignment: str, nb: nbformat.NotebookNode) -> Path:
    """Save ``nb`` as ``student``'s submission in ``submitted/``, with what ``nbgrader submit`` puts beside it
    and ``nbgrader collect`` copies there: ``timestamp.txt`` (now, in nbgrader's format; autograde records it)
    and ``submission_secret.txt`` (``nbgrader release_feedback`` reads both). Returns the notebook's path."""
    path = course / "submitted" / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    now = datetime.datetime.now(datetime.timezone.utc)
    (path.parent / "timestamp.txt").write_text(now.strftime(TIMESTAMP_FORMAT))
    (path.parent / "submission_secret.txt").write_text(secrets.token_hex(64))
    return path


def cuda_answers(track: str, sources: dict[str, str] | None = None) -> dict[str, str]:
    """Solution cells for a CUDA track's notebook, by grade_id: the source notebook's own (the references,
    with nbgrader's markers removed), except that the kernels in ``sources`` (kernel id -> CUDA source) are
    handed in instead, as the cell's last ``<id>_src`` (the one that counts where the release keeps a first one:
    a sabotaged kernel); the cell's other lines (a student's geometry, a search space) stay."""
    path = tracks.get(track).notebook_path
    nb = nbformat.read(str(path), as_version=4)
    answers = {c.metadata.nbgrader["grade_id"]: strip_solution_markers(c.source) for c in nb.cells if is_solution(c)}
    for kid, source in (sources or {}).items():
        if kid not in answers:
            raise KeyError(f"no solution cell {kid!r} in {path.name}")
        last = list(re.finditer(rf'^{kid}_src = r""".*?"""', answers[kid], re.DOTALL | re.MULTILINE))[-1]
        answers[kid] = (f'{answers[kid][:last.start()]}{kid}_src = r"""\n{source.strip()}\n"""'
                        f'{answers[kid][last.end():]}')
    return answers


def wrong_groups(track: str) -> list[dict[str, Path]]:
    """A CUDA track's known-wrong solutions grouped into submissions, no two in one replacing the same kernel
    (kernel id -> solution file)."""
    groups: list[dict[str, Path]] = []
    for path in tracks.get(track).wrong_solutions():
        kernel = tracks.graded_kernel(path)
        group = next((g for g in groups if kernel not in g), None)
        if group is None:
            groups.append(group := {})
        group[kernel] = path
    return groups


def wrong_group_answers(track: str, group: dict[str, Path]) -> dict[str, str]:
    """The solution cells of a submission handing in ``group`` (`wrong_groups`), the other kernels as the stub."""
    answers = cuda_answers(track, {kernel: path.read_text() for kernel, path in group.items()})
    return {kernel: answers[kernel] for kernel in group}



def quiz_answers(track: str, student: str, wrong: Path | None = None) -> dict[str, str]:
    """A quiz's solution cells, by grade_id: the key's answers for ``student`` (their own numbers), with the cells
    of the known-wrong answer file ``wrong`` (``solutions/wrong/``) swapped in."""
    answers = {q.id: f"{q.id} = {answer_literal(right_answer(track, q, student))}"
               for q in tracks.get(track).problem_module().QUESTIONS}
    return answers | (read_cells(wrong) if wrong else {})
