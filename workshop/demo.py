"""``workshop demo``: the course flow end to end on the puzzles track, in a scratch course directory.

Release the assignment, submit three notebooks (the reference solutions, the untouched stub, and one with a
wrong kernel in Zip and an access-limit violation in Pooling), autograde them with nbgrader, export
grades.csv (nbgrader's) and grades-detail.csv (`workshop export`) and print a per-student summary, with the
full path of every file it writes. Uses the GPU when numba-cuda finds one, else the simulator.
"""
from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pandas as pd

from gradebook.summary import cell_scores, failure_messages, student_table
from workshop import course as nbg
from workshop import export, submissions

ASSIGNMENT = "puzzles"
STUDENTS = [
    ("reference", "Ada", "Reference", submissions.reference_answers),
    ("stub", "Sam", "Stub", dict),
    ("mistakes", "Mo", "Mistakes", lambda: submissions.wrong_answers("zip_subtracts", "pooling_global_reads")),
]


def _step(n: int, text: str) -> None:
    print(f"[{n}/5] {text}", flush=True)


def _wrote(*paths: Path) -> None:
    for path in paths:
        print(f"      wrote {path}")


def _choose_target() -> str:
    from graders.gpu import detect_gpu
    from graders.numba_engine.grade import target
    t = target()
    if t == "sim":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"   # the notebook kernels too
        print("No GPU found: kernels run in numba-cuda's simulator on the CPU.")
    else:
        print(f"GPU found ({detect_gpu().name}): correctness runs on the GPU, "
              "access limits are counted in the simulator.")
    return t


def _choose_sandbox() -> None:
    """The demo grades its own known notebooks: without bubblewrap it may run unsandboxed, and says so."""
    from graders.sandbox.run import SandboxUnavailable, sandbox_argv, sandbox_enabled
    if not sandbox_enabled():
        print("WORKSHOP_SANDBOX=off: student code runs WITHOUT the sandbox (trusted local use only).")
        return
    try:
        sandbox_argv(["true"])
    except SandboxUnavailable as exc:
        os.environ["WORKSHOP_SANDBOX"] = "off"
        print(f"{exc}\nThis demo grades only its own notebooks, so it goes on WITHOUT the sandbox "
              "(WORKSHOP_SANDBOX=off). Never grade students' work like this.")
        return
    print("Student code runs in the bubblewrap sandbox (no network, read-only files, capped).")


def run_demo(dest: Path | None = None) -> int:
    course = (dest or Path(tempfile.mkdtemp(prefix="workshop-demo-"))).resolve()
    print(f"Course directory: {course}")
    _choose_sandbox()
    _choose_target()

    _step(1, f"nbgrader generate_assignment {ASSIGNMENT}")
    nbg.make_course(course, [ASSIGNMENT])
    _wrote(course / "nbgrader_config.py", course / "assignments" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    release = nbg.release(course, ASSIGNMENT)
    _wrote(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", course / "gradebook.db")

    _step(2, "three students submit")
    for student, first, last, answers in STUDENTS:
        nbg.add_student(course, student, first, last)
        _wrote(submissions.write(course, student, ASSIGNMENT, submissions.fill(release, answers())))

    _step(3, f"nbgrader autograde {ASSIGNMENT}, one student at a time")
    for student, *_ in STUDENTS:
        seconds = nbg.autograde(course, ASSIGNMENT, student)
        print(f"      {student}: graded in {seconds:.1f} s", flush=True)
        _wrote(_autograded(course, student))

    _step(4, "nbgrader export -> grades.csv; workshop export -> grades-detail.csv")
    nbg.nbgrader(course, "export", "--to=grades.csv")
    _wrote(course / "grades.csv", export.write(course, Path("grades-detail.csv")))
    grades = pd.read_csv(course / "grades.csv")
    print(grades[["student_id", "raw_score", "max_score"]].to_string(index=False))

    _step(5, "summary from the gradebook")
    table = student_table(cell_scores(f"sqlite:///{course / 'gradebook.db'}", ASSIGNMENT))
    for student, *_ in STUDENTS:
        row = table.loc[student]
        print(f"  {student}: {row['total']:g} / {row['max']:g}")
        messages = failure_messages(_autograded(course, student))
        if student != "stub":   # the stub fails every test; one line says it
            for grade_id, message in messages.items():
                print(_wrapped(f"{grade_id}: {message}"))
        elif messages:
            print(f"      {len(messages)} test cells failed (nothing attempted)")
    return 0


MESSAGE_CHARS = 800   # of one failure message in the summary; a longer one ends with " …"


def _wrapped(message: str) -> str:
    """A failure message for the terminal: at most `MESSAGE_CHARS`, cut between words with " …", in lines of at
    most 100 characters under the summary's indentation (the whole message is in the autograded notebook)."""
    short = textwrap.shorten(message, MESSAGE_CHARS, placeholder=" …")
    return textwrap.fill(short, 100, initial_indent=" " * 6, subsequent_indent=" " * 8, break_on_hyphens=False)


def _autograded(course: Path, student: str) -> Path:
    return course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
