"""The functions a hidden test cell may call, and what such a call does in each process that makes it.

A hidden test cell holds one call, e.g. ``score('gemm', 'naive', naive_src)``. Two processes make it:

- the notebook's own kernel: while a student validates or an instructor runs the source notebook, the call
  grades (in sandboxed children) and prints the report; during ``nbgrader autograde`` it only prints one line,
  because there the notebook's kernel is the student's process and its output is never trusted;
- the trusted grader (`graders.autograde`), inside nbgrader's own process: it makes the same call with
  arguments read from the submitted file and writes the cell's output itself. Before a submission's first timed
  test it runs the timed tests' preparations (`hidden_test`'s ``prepare``, or ``prepare_together`` for all of a
  test's calls at once; an untimed test's from the grading's start), whose values the tests read (`prepared`).
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import textwrap
import threading
from typing import Callable

GRADED_OUTSIDE = "graded from the submitted file by the trusted grader (this cell's output is replaced)"

HIDDEN_TESTS: dict[str, Callable] = {}


STUB_MARK = "// YOUR CODE HERE"   # how the release's CUDA C++ stub begins (graders.notebook.CUDA_STUB)
_STUB_TOKEN = "\0stub\0"


def still_the_stub(value) -> bool:
    """Whether ``value`` is CUDA C++ source with a function body that holds only the release's stub comment."""
    if not isinstance(value, str) or STUB_MARK not in value:
        return False
    code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: _STUB_TOKEN if m.group().startswith(STUB_MARK) else " ", value,
                  flags=re.DOTALL)
    return re.search(rf"\{{\s*{re.escape(_STUB_TOKEN)}\s*\}}", code) is not None


def _names_a_stub(args: tuple, kwargs: dict) -> bool:
    """Whether any argument of a hidden-test call is a kernel still the release's stub (`still_the_stub`)."""
    return any(still_the_stub(value) for value in (*args, *kwargs.values()))


def _refusing_stubs(function: Callable) -> Callable:
    """``function``, except that a kernel still the release's stub fails without being compiled or run (an
    empty kernel would otherwise meet a structural check such as "no spills")."""
    @functools.wraps(function)
    def graded(*args, **kwargs):
        if _names_a_stub(args, kwargs):
            print(NOT_WRITTEN)
            raise TestFailed(NOT_WRITTEN)
        return function(*args, **kwargs)

    return graded


NOT_WRITTEN = "the kernel is not written yet (its body is still the stub's comment)"


def _skipping_stubs(prepare: Callable) -> Callable:
    """``prepare``, except that a kernel still the release's stub is not prepared (its test refuses it unrun)."""
    @functools.wraps(prepare)
    def preparing(*args, **kwargs):
        if _names_a_stub(args, kwargs):
            return None
        return prepare(*args, **kwargs)

    return preparing


def _skipping_stubs_together(prepare_together: Callable) -> Callable:
    """``prepare_together``, except that a call naming a kernel still the release's stub is not handed to it: its
    value is None (`_skipping_stubs`). Raises `ValueError` where it returns another number of values than calls."""
    @functools.wraps(prepare_together)
    def preparing(calls: list[tuple[tuple, dict]]) -> list:
        written = [i for i, (args, kwargs) in enumerate(calls) if not _names_a_stub(args, kwargs)]
        values = [None] * len(calls)
        if written:
            for i, value in zip(written, prepare_together([calls[i] for i in written]), strict=True):
                values[i] = value
        return values

    return preparing


LINE_WIDTH = 83   # of a message's line, wherever it is shown: ``nbgrader validate`` shows 83 characters of one


def wrapped(text: str) -> list[str]:
    """``text``'s lines, each one longer than `LINE_WIDTH` wrapped at spaces (a longer word is split) with its
    continuation indented: how a failure reads in ``nbgrader validate``, formgrader and the feedback, whose pages
    show an output's line unwrapped, cut off at the page's edge."""
    def parts(line: str) -> list[str]:
        if len(line) <= LINE_WIDTH:
            return [line]
        return textwrap.wrap(line, LINE_WIDTH, subsequent_indent="    ", break_on_hyphens=False)

    return [part for line in text.splitlines() for part in parts(line)]


class TestFailed(AssertionError):
    """A test about the student's kernel failed; the message says why. IPython shows it as this one message,
    not as a traceback into the grader (``_render_traceback_``)."""

    def _render_traceback_(self) -> list[str]:
        """The message's lines, long ones wrapped (`wrapped`)."""
        return wrapped(f"{type(self).__name__}: {self}")


RUN_ALONE: set[str] = set()      # hidden tests that time kernels: never run beside another one
PREPARE: dict[str, Callable] = {}   # a timed test's preparation, by the test's name (`hidden_test`)
PREPARE_TOGETHER: dict[str, Callable] = {}   # the preparation of all of a submission's calls of a timed test, likewise
_in_trusted_grader = False


def enter_trusted_grader() -> None:
    """Called once by the trusted grader: from here on, hidden-test calls in this process grade."""
    global _in_trusted_grader
    _in_trusted_grader = True


def in_trusted_grader() -> bool:
    """True in nbgrader's process once the trusted grader has started (`enter_trusted_grader`)."""
    return _in_trusted_grader


_graded = threading.local()


@contextlib.contextmanager
def grading_student(student: str):
    """While the trusted grader grades ``student``'s submission on this thread (nbgrader's student id, from the
    submission's resources), `graded_student` names them."""
    _graded.student = student
    try:
        yield
    finally:
        _graded.student = None


def graded_student() -> str | None:
    """The student whose submission the trusted grader is grading on this thread; None elsewhere."""
    return getattr(_graded, "student", None)


_prepared = threading.local()


@contextlib.contextmanager
def preparation(value):
    """While the trusted grader runs a timed test on this thread: what the test's preparation (`PREPARE`) returned,
    which the engine reads with `prepared`."""
    _prepared.value = value
    try:
        yield
    finally:
        _prepared.value = None


def prepared():
    """What the running timed test's preparation returned on this thread (`preparation`); None elsewhere."""
    return getattr(_prepared, "value", None)


def autograding_in_notebook() -> bool:
    """True inside a notebook kernel that ``nbgrader autograde`` started (nbgrader sets the variable)."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde" and not _in_trusted_grader


def hidden_test(function: Callable | None = None, *, alone: bool = False, prepare: Callable | None = None,
                prepare_together: Callable | None = None):
    """Register ``function`` for the trusted grader; return its notebook-side wrapper.

    ``@hidden_test(alone=True)`` marks a test that measures speed: the trusted grader runs it by itself.
    ``prepare`` (called with the test's arguments) does work the test needs that times nothing: the trusted grader
    runs the preparations of a submission's timed tests side by side before the first of them (an untimed test's
    from the grading's start, the test waiting for them), and hands each test what its preparation returned
    (`prepared`; None: the test does that work itself); a preparation that raises leaves that work to the test.
    ``prepare_together`` (beside ``prepare``), called once with the list of all of a submission's calls of the test
    (each its arguments and keywords), returns for each call, in order, what ``prepare`` would return or the
    exception it would raise: work that costs less for them all at once; where it raises, the trusted grader runs
    ``prepare`` for each call instead."""
    if function is None:
        return functools.partial(hidden_test, alone=alone, prepare=prepare, prepare_together=prepare_together)
    if prepare_together is not None and prepare is None:
        raise ValueError(f"{function.__name__}: prepare_together needs prepare, which stands in where it fails")
    HIDDEN_TESTS[function.__name__] = _refusing_stubs(function)
    if alone:
        RUN_ALONE.add(function.__name__)
    if prepare is not None:
        PREPARE[function.__name__] = _skipping_stubs(prepare)
    if prepare_together is not None:
        PREPARE_TOGETHER[function.__name__] = _skipping_stubs_together(prepare_together)

    @functools.wraps(function)
    def in_notebook(*args, **kwargs):
        if autograding_in_notebook():
            print(GRADED_OUTSIDE)
            return None
        return function(*args, **kwargs)

    return in_notebook
