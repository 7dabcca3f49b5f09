"""A model-engine assignment's class leaderboard (``workshop leaderboard``): each problem's ranking by speed-up.

Where its rows come from:

- students: what each graded cell's hidden test graded, stored in the autograded notebook by the trusted grader
  (``metadata.workshop.results``, `graders.autograde.TrustedGrades`), for every submission of the assignment in
  the gradebook; the GPU and the time of the grading from the notebook's ``metadata.workshop.graded_on``
  (`gradebook.graded_on`);
- the machine's kernels (AI-written, a vendor library's): the records ``workshop grade-folder`` writes
  (`workshop.grade_folder`), one `Entry` per file, the same form a student's result is read into here;
- PyTorch eager and ``torch.compile``: the baselines every correct grading above timed beside its submission,
  one row each, at the median over those gradings of their speed-up.

A row's speed-up is over the problem's ranking baseline (``torch.compile`` where every correct grading timed it,
else eager), measured within one grading: the submission's median call against the baseline's median call in
the same child, on the same GPU. Only correct submissions are ranked. The public page (``index.html``) names
students by a pseudonym (`pseudonym`: keyed by a course secret, not guessable from the student id) and only
counts what was excluded; each student's own page (``you/<token>.html``, `page_token`) marks their rows and
shows why their excluded submissions were excluded. The pages are static files (`write`): nothing to run or
secure beside the course directory, and an own page is reachable only by its unguessable name (``you/`` is
``0711``: it cannot be listed). The CSV (`csv_rows`) has every row with the student ids, reasons and pages, for
the TA, beside ``workshop export``'s.
"""
from __future__ import annotations

import csv
import datetime
import hashlib
import hmac
import json
import os
import secrets
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from jinja2 import Environment, FileSystemLoader, select_autoescape
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory

from gradebook.graded_on import KEY
from graders.autograde import graded_cells, stored_results
from graders.model_engine.grade import FAST_P, fast_p
from graders.model_engine.spec import load_model_spec
from graders.result import GradeResult, Status

TEMPLATES = Path(__file__).parent / "templates"
KEY_FILE = ".leaderboard-key"   # in the course directory: the secret behind pseudonyms and own pages' names
STUDENT = "student"
MACHINE_KINDS = {"ai": "AI-written", "vendor": "vendor library"}
BASELINES = {"eager": "PyTorch eager", "compile": "torch.compile"}
WHO = {STUDENT: "student", **MACHINE_KINDS, **BASELINES}


@dataclass(frozen=True)
class Entry:
    """One graded submission of one problem: a student's, or a machine's (``kind`` in `MACHINE_KINDS`).
    ``result`` is its `graders.result.GradeResult` as a dict (``as_dict``)."""

    assignment: str
    problem: str
    author: str
    kind: str
    gpu: str
    graded_at: str   # ISO 8601, UTC; "" when not recorded
    result: dict

    @property
    def ok(self) -> bool:
        return self.result.get("status") == Status.OK and "speedup" in self.result.get("timing", {})

    @property
    def timing(self) -> dict:
        return self.result.get("timing", {})

    @property
    def reason(self) -> str:
        """Why it is not ranked ("" when it is)."""
        return "" if self.ok else GradeResult.from_dict(self.result).failure_line()

    def as_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Entry:
        return cls(**json.loads(text))


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _gpu(result: dict, graded_on: dict) -> str:
    if result.get("target") == "cpu":
        return "cpu"
    return graded_on.get("gpu") or "unknown GPU"


def student_entries(course: Path, assignment: str, gradebook_url: str) -> list[Entry]:
    """What the trusted grader stored for every submission of ``assignment`` in the gradebook."""
    coursedir = CourseDirectory(root=str(course))
    with Gradebook(gradebook_url) as gb:
        try:
            submissions = [(s.student_id, [nb.name for nb in s.notebooks])
                           for s in gb.find_assignment(assignment).submissions]
        except MissingEntry:
            return []
    entries = []
    for student, notebooks in submissions:
        folder = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
        for name in notebooks:
            path = folder / f"{name}.ipynb"
            if not path.is_file():
                continue
            nb = nbformat.read(str(path), as_version=4)
            graded_on = nb.metadata.get(KEY, {}).get("graded_on") or {}
            entries += [Entry(assignment, r["test"], student, STUDENT, _gpu(r, graded_on), graded_on.get("at", ""), r)
                        for cell in graded_cells(nb) for r in stored_results(cell)]
    return entries


def machine_entries(folder: Path, assignment: str) -> list[Entry]:
    """The records ``workshop grade-folder`` wrote under ``folder`` (``<problem>/<author>.json``)."""
    if not folder.is_dir():
        return []
    entries = [Entry.from_json(p.read_text()) for p in sorted(folder.glob("*/*.json"))]
    return [e for e in entries if e.assignment == assignment]


@dataclass
class Row:
    """One ranked line of a problem's table."""

    author: str          # the student id, the machine kernel's name, or the baseline's label
    kind: str            # a key of `WHO`
    speedup: float
    median_ms: float
    gpu: str
    graded_at: str
    gradings: int = 1    # how many gradings a baseline row is the median of
    rank: int = 0


@dataclass
class Board:
    """One problem's ranking (correct submissions and the baselines) and what was excluded from it."""

    problem: str
    baseline: str                      # a key of `BASELINES`: what the speed-ups are over
    rows: list[Row]
    excluded: list[Entry] = field(default_factory=list)
    fast: dict[str, dict[float, tuple[int, int]]] = field(default_factory=dict)   # `fast_shares`

    @property
    def gpus(self) -> list[str]:
        return sorted({r.gpu for r in self.rows})


def _best(entries: list[Entry], baseline: str) -> list[Entry]:
    """Each author's best entry: their fastest correct one over ``baseline``, else their latest failure."""
    best: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        key = (entry.kind, entry.author)
        held = best.get(key)
        faster = entry.ok and held is not None and held.ok and \
            entry.timing["speedup"][baseline] > held.timing["speedup"][baseline]
        if held is None or not held.ok or faster:
            best[key] = entry
    return list(best.values())


def board(problem: str, entries: list[Entry]) -> Board:
    """``problem``'s ranking from its ``entries`` (see the module's docstring)."""
    entries = [e for e in entries if e.problem == problem]
    correct = [e for e in entries if e.ok]
    baseline = "compile" if correct and all("compile" in e.timing["speedup"] for e in correct) else "eager"
    entries = _best(entries, baseline)
    correct = [e for e in entries if e.ok]
    rows = [Row(e.author, e.kind, e.timing["speedup"][baseline], e.timing["submission"]["median_s"] * 1e3, e.gpu,
                e.graded_at) for e in correct]
    for name in BASELINES:
        timed = [e for e in correct if name in e.timing]
        if timed:
            rows.append(Row(BASELINES[name], name,
                            statistics.median(e.timing[baseline]["median_s"] / e.timing[name]["median_s"]
                                              for e in timed),
                            statistics.median(e.timing[name]["median_s"] for e in timed) * 1e3,
                            ", ".join(sorted({e.gpu for e in timed})), max(e.graded_at for e in timed), len(timed)))
    rows.sort(key=lambda r: -r.speedup)
    for i, row in enumerate(rows):
        row.rank = rows[i - 1].rank if i and row.speedup == rows[i - 1].speedup else i + 1
    return Board(problem, baseline, rows, [e for e in entries if not e.ok], fast_shares(entries, baseline))


def fast_shares(entries: list[Entry], baseline: str) -> dict[str, dict[float, tuple[int, int]]]:
    """KernelBench's fast_p of the students' and of the AI-written submissions (one each per author): at each p of
    `graders.model_engine.grade.FAST_P`, (how many are correct and at least p times as fast as ``baseline``, of how
    many)."""
    shares = {}
    for kind in (STUDENT, "ai"):
        results = [GradeResult.from_dict(e.result) for e in entries if e.kind == kind]
        if results:
            shares[kind] = {p: (round(fast_p(results, p, baseline) * len(results)), len(results)) for p in FAST_P}
    return shares


def boards(assignment: str, entries: list[Entry]) -> list[Board]:
    """A `Board` per problem of ``assignment``'s spec, in the spec's order."""
    return [board(p, entries) for p in load_model_spec(assignment).problems]


def course_key(course: Path) -> bytes:
    """The course's leaderboard secret (`KEY_FILE`, made on first use, readable by its owner only)."""
    path = course / KEY_FILE
    if not path.is_file():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def pseudonym(key: bytes, student: str) -> str:
    """A student's name on the public page: the same on every refresh, not guessable without the course's key."""
    return f"student {_mac(key, 'name:' + student)[:6]}"


def page_token(key: bytes, assignment: str, student: str) -> str:
    """The name of a student's own page of ``assignment``'s leaderboard (128 bits)."""
    return _mac(key, f"page:{assignment}:{student}")[:32]


def _shown(row: Row, key: bytes, me: str | None, anonymous: bool = True) -> str:
    if row.kind != STUDENT:
        return row.author
    name = pseudonym(key, row.author) if anonymous else row.author
    return f"you ({name})" if row.author == me else name


def render(assignment: str, made: list[Board], key: bytes, me: str | None = None, anonymous: bool = True) -> str:
    """The page: the public one (``me`` None), or student ``me``'s own; students by pseudonym unless not
    ``anonymous``."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2"]))
    tables = [{"board": b, "rows": [{"row": r, "name": _shown(r, key, me, anonymous),
                                     "you": r.kind == STUDENT and r.author == me} for r in b.rows],
               "mine": [e for e in b.excluded if e.kind == STUDENT and e.author == me],
               "excluded_students": sum(e.kind == STUDENT for e in b.excluded),
               "excluded_machine": sum(e.kind != STUDENT for e in b.excluded)} for b in made]
    return env.get_template("leaderboard.html.j2").render(
        assignment=assignment, tables=tables, me=me, anonymous=anonymous, who=WHO, baselines=BASELINES,
        refreshed=now())


def csv_rows(assignment: str, made: list[Board], key: bytes) -> list[dict]:
    """Every ranked and excluded submission, with who it is: the TA's export."""
    out = []
    for b in made:
        for r in b.rows:
            student = r.author if r.kind == STUDENT else ""
            out.append({"assignment": assignment, "problem": b.problem, "rank": r.rank, "name": _shown(r, key, None),
                        "student_id": student, "kind": r.kind, "status": "ok", "speedup": round(r.speedup, 4),
                        "baseline": b.baseline, "median_ms": round(r.median_ms, 6), "gpu": r.gpu,
                        "graded_at": r.graded_at, "reason": "",
                        "page": f"you/{page_token(key, assignment, student)}.html" if student else ""})
        for e in b.excluded:
            student = e.author if e.kind == STUDENT else ""
            out.append({"assignment": assignment, "problem": b.problem, "rank": "",
                        "name": pseudonym(key, e.author) if student else e.author, "student_id": student,
                        "kind": e.kind, "status": e.result.get("status", ""), "speedup": "", "baseline": b.baseline,
                        "median_ms": "", "gpu": e.gpu, "graded_at": e.graded_at, "reason": e.reason,
                        "page": f"you/{page_token(key, assignment, student)}.html" if student else ""})
    return out


def write(course: Path, assignment: str, entries: list[Entry], to: Path, csv_path: Path,
          anonymous: bool = True) -> list[Path]:
    """The public page ``to/index.html``, each student's own page ``to/you/<token>.html`` and the TA's CSV at
    ``csv_path``; returns the paths written. ``anonymous``: students by pseudonym on the pages (the CSV has both)."""
    key = course_key(course)
    made = boards(assignment, entries)
    own = to / "you"
    own.mkdir(parents=True, exist_ok=True)
    os.chmod(own, 0o711)
    written = [to / "index.html"]
    written[0].write_text(render(assignment, made, key, anonymous=anonymous))
    for student in sorted({e.author for e in entries if e.kind == STUDENT}):
        page = own / f"{page_token(key, assignment, student)}.html"
        page.write_text(render(assignment, made, key, me=student, anonymous=anonymous))
        written.append(page)
    for page in written:
        os.chmod(page, 0o644)
    rows = csv_rows(assignment, made, key)
    with csv_path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["assignment"])
        writer.writeheader()
        writer.writerows(rows)
    return [*written, csv_path]
