"""The functions a hidden test cell may call, and what such a call does in each process that makes it.

A hidden test cell holds one call, e.g. ``score('gemm', 'naive', naive_src)``. Two processes make it:

- the notebook's own kernel: while a student validates or an instructor runs the source notebook, the call
  grades (in sandboxed children) and prints the report; during ``nbgrader autograde`` it only prints one line,
  because there the notebook's kernel is the student's process and its output is never trusted;
- the trusted grader (`graders.autograde`), inside nbgrader's own process: it makes the same call with
  arguments read from the submitted file and writes the cell's output itself.
"""
from __future__ import annotations

import functools
import os
from typing import Callable

GRADED_OUTSIDE = "graded from the submitted file by the trusted grader (this cell's output is replaced)"

HIDDEN_TESTS: dict[str, Callable] = {}
RUN_ALONE: set[str] = set()      # hidden tests that time kernels: never run beside another one
_in_trusted_grader = False


def enter_trusted_grader() -> None:
    """Called once by the trusted grader: from here on, hidden-test calls in this process grade."""
    global _in_trusted_grader
    _in_trusted_grader = True


def autograding_in_notebook() -> bool:
    """True inside a notebook kernel that ``nbgrader autograde`` started (nbgrader sets the variable)."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde" and not _in_trusted_grader


def hidden_test(function: Callable | None = None, *, alone: bool = False):
    """Register ``function`` for the trusted grader; return its notebook-side wrapper.

    ``@hidden_test(alone=True)`` marks a test that measures speed: the trusted grader runs it by itself."""
    if function is None:
        return functools.partial(hidden_test, alone=alone)
    HIDDEN_TESTS[function.__name__] = function
    if alone:
        RUN_ALONE.add(function.__name__)

    @functools.wraps(function)
    def in_notebook(*args, **kwargs):
        if autograding_in_notebook():
            print(GRADED_OUTSIDE)
            return None
        return function(*args, **kwargs)

    return in_notebook
