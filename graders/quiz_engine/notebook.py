"""A quiz track's nbgrader source notebook, built from its ``problem.py`` (``TITLE``, ``INTRO``, ``QUESTIONS``) and,
for the solution cells, its ``key.py`` (the answers of `REFERENCE_STUDENT`).

Cells: the introduction, the set-up cell, then per question a markdown cell (the question, its options or its
numbered code, the answer's form and points), for a numeric question a read-only ``<id>_numbers`` cell (the
student's own numbers), the solution cell ``<id>`` (``<id> = None``, then the answer between nbgrader's solution
markers) and the graded ``<id>_score`` cell (public: the answer's form; hidden: `grade_answer`).
"""
from __future__ import annotations

import nbformat

from graders import tracks
from graders.notebook import graded_test, locked, markdown, notebook, solution
from graders.quiz_engine.grade import right_answer
from graders.quiz_engine.questions import REFERENCE_STUDENT, Choice, Line, Numeric, Question

# The solution stub of a quiz's release, by its kernelspec language (``ClearSolutions.code_stub`` in
# nbgrader_config.py): the solution cell keeps ``<id> = None`` above it.
QUIZ_LANGUAGE = "quiz"
QUIZ_STUB = "# YOUR ANSWER: replace None above"
SETUP = "from graders.quiz_engine.grade import check_answer, grade_answer, show_numbers"
HOW = """
Each question has a cell `<name> = None`: replace `None` with your answer, a literal (`"b"`, `42`, `3.5e9`),
never an expression or a call: the grader reads the literal from the file you hand in and runs nothing. The
graded cell under it checks only that your answer has the right form; it is graded against the key once you hand
the notebook in. Numeric questions give each student their own numbers: run the cell that states them (they are
drawn from your course id, the name `nbgrader submit` hands your work in under; on your own machine set
`WORKSHOP_STUDENT` to it).
"""


def form(q: Question) -> str:
    if isinstance(q, Choice):
        return "one letter: " + ", ".join(f'`"{k}"`' for k in q.options)
    if isinstance(q, Line):
        return f"a line number, 1 to {q.lines}"
    return f"a number{f' in {q.unit}' if q.unit else ''}, right {q.tolerance()}"


def _statement(number: int, q: Question) -> str:
    parts = [f"## Question {number}", q.text]
    if isinstance(q, Choice):
        parts.append("\n".join(f"- **{k}**: {text}" for k, text in q.options.items()))
    if isinstance(q, Line):
        code = q.code.strip("\n").split("\n")
        parts.append("```\n" + "\n".join(f"{i:>2}  {line}" for i, line in enumerate(code, 1)) + "\n```")
    plural = "" if q.points == 1 else "s"
    parts.append(f"*Answer: {form(q)}. {q.points:g} point{plural}.*")
    return "\n\n".join(parts)


def answer_literal(value) -> str:
    """A key's answer as the solution cell writes it (a float to 6 significant digits)."""
    if isinstance(value, float) and not value.is_integer():
        return repr(float(f"{value:.6g}"))
    return repr(int(value) if isinstance(value, float) else value)


def build(name: str) -> nbformat.NotebookNode:
    track = tracks.get(name)
    problem = track.problem_module()
    cells = [markdown(f"# {problem.TITLE}\n\n{problem.INTRO.strip()}\n{HOW}"), locked(SETUP, "setup")]
    for number, q in enumerate(problem.QUESTIONS, start=1):
        cells.append(markdown(_statement(number, q)))
        if isinstance(q, Numeric):
            cells.append(locked(f"show_numbers({name!r}, {q.id!r})", f"{q.id}_numbers"))
        answer = answer_literal(right_answer(name, q, REFERENCE_STUDENT))
        cells.append(solution(f"{q.id} = None\n### BEGIN SOLUTION\n{q.id} = {answer}\n### END SOLUTION", q.id))
        cells.append(graded_test(f"check_answer({name!r}, {q.id!r}, {q.id})",
                                 f"grade_answer({name!r}, {q.id!r}, {q.id})", f"{q.id}_score", q.points,
                                 "your answer, against the key"))
    return notebook(cells, QUIZ_LANGUAGE)
