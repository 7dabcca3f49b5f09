"""A submission's grading child (graders.sandbox.session): one sandboxed process answers request after request,
each with a fresh child's limit and caps, and a fresh process follows any request that left it unfit."""
from __future__ import annotations

import time

from nbformat.v4 import new_code_cell, new_notebook

from graders import autograde, hidden_tests
from graders.sandbox import capped_output
from graders.sandbox.run import run_child
from graders.sandbox.session import ChildSession, current
from graders.submission import Submission
from tests.processes import processes_with

SERVED = "served_child"


def ask(env, **request):
    return run_child(SERVED, request, timeout_s=30, env=env, reusable=True)


def test_one_process_answers_the_requests_of_a_session_and_only_of_it(fake_env):
    with ChildSession() as session:
        assert current() is session
        assert [ask(fake_env).answer["served"] for _ in range(3)] == [1, 2, 3]
        assert run_child(SERVED, {}, timeout_s=30, env=fake_env).answer["served"] == 1   # not reusable: fresh
        assert session.started == 1
    assert current() is None
    assert ask(fake_env).answer["served"] == 1 and ask(fake_env).answer["served"] == 1   # no session: fresh
    with ChildSession():
        assert ask(fake_env).answer["served"] == 1    # nothing survives from the previous session


def test_a_request_that_leaves_the_process_unfit_is_followed_by_a_fresh_one(fake_env):
    with ChildSession() as session:
        assert ask(fake_env).answer["served"] == 1
        unfit = ask(fake_env, fit=False)
        assert unfit.ok and unfit.answer == {"served": 2, "fit": False, "pad": ""}
        assert ask(fake_env).answer["served"] == 1 and session.started == 2


def test_a_request_past_its_limit_is_a_timeout_and_the_next_one_starts_afresh(fake_env):
    with ChildSession() as session:
        ask(fake_env)
        late = run_child(SERVED, {"sleep_s": 60}, timeout_s=2, env=fake_env, reusable=True)
        assert late.status == "timeout" and "stopped after 2 s" in late.message and late.seconds < 10
        assert ask(fake_env).answer["served"] == 1 and session.started == 2


def test_a_child_that_dies_is_a_crash_with_its_exit_status(fake_env):
    with ChildSession() as session:
        died = ask(fake_env, exit=3)
        assert died.status == "crashed" and "exited with status 3" in died.message
        assert ask(fake_env).answer["served"] == 1 and session.started == 2


def test_each_requests_output_is_capped_on_its_own(fake_env):
    with ChildSession():
        loud = ask(fake_env, print=100_000)
        assert loud.ok and f"the grader keeps the last {capped_output.TAIL_BYTES} bytes" in loud.stdout
        assert len(loud.stdout) < capped_output.TAIL_BYTES + 200
        quiet = ask(fake_env)
        assert quiet.answer["served"] == 2 and quiet.stdout == ""


def test_other_caps_or_environment_get_their_own_process(fake_env):
    with ChildSession() as session:
        ask(fake_env)
        other = run_child(SERVED, {}, timeout_s=30, env=fake_env, reusable=True, memory_bytes=2 << 30)
        assert other.answer["served"] == 1 and session.started == 2


def test_the_sessions_end_leaves_no_process(fake_env):
    marker = "--serve"
    with ChildSession():
        ask(fake_env)
        assert processes_with(marker)
    deadline = time.monotonic() + 5    # the sandbox dies with its supervisor, a moment after it
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with(marker)


def test_an_answer_over_its_cap_is_a_crash_and_ends_the_process(fake_env, monkeypatch):
    monkeypatch.setattr(capped_output, "ANSWER_BYTES", 200)
    with ChildSession() as session:
        big = ask(fake_env, pad="y" * 200)
        assert big.status == "crashed" and "larger than 200 bytes" in big.message
        assert session.started == 1 and ask(fake_env).answer["served"] == 1 and session.started == 2




class _Log:
    """nbgrader's logger as the grading uses it: each line, formatted."""

    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        return lambda text, *args: self.lines.append(text % args)


def test_autograde_grades_a_submissions_timed_tests_in_one_child_and_the_others_in_fresh_ones(fake_env, monkeypatch):
    """The trusted grader's timed tests (RUN_ALONE) share the submission's child; the others run in fresh ones."""
    served = {}

    def timed(name):
        served[name] = ask(fake_env).answer["served"]

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", timed)
    monkeypatch.setattr(hidden_tests, "RUN_ALONE", hidden_tests.RUN_ALONE | {"timed"})
    monkeypatch.setattr(autograde, "RUN_ALONE", hidden_tests.RUN_ALONE)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "untimed", timed)
    cells = [new_code_cell(f"{test}('{test}{i}')", metadata={"nbgrader": {"grade_id": f"{test}{i}"}})
             for test in ("timed", "untimed") for i in range(3)]
    log = _Log()
    grading = autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=120)
    grading.finish()
    assert served == {"timed0": 1, "timed1": 2, "timed2": 3, "untimed0": 1, "untimed1": 1, "untimed2": 1}
    assert "The timed hidden tests ran in 1 grading child(ren)" in log.lines
