"""A submission's grading child (graders.sandbox.session): one sandboxed process answers request after request,
each with a fresh child's limit and caps, and a fresh process follows any request that left it unfit."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from graders import autograde, hidden_tests
from graders.cuda_engine.grade import result_from_child
from graders.cuda_engine.spec import load_spec
from graders.result import publish
from graders.sandbox import capped_output
from graders.sandbox.run import ChildResult, run_child
from graders.sandbox.session import ChildSession, SessionPool, current, process_session
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
        assert unfit.ok and unfit.answer["served"] == 2 and unfit.answer["fit"] is False
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
    env, marker = _marked(fake_env, "session")
    with ChildSession():
        ask(env)
        assert processes_with(marker)
    assert _gone(marker)


def _marked(env: dict[str, str], name: str) -> tuple[dict[str, str], str]:
    """``env`` with a marker of this test's own, which the sandbox's command line carries (``--setenv``), and the
    marker: its children, told from a notebook's kept child or another test's, which carry ``--serve`` too."""
    marker = f"kw-{name}-{uuid.uuid4().hex[:12]}"
    return env | {"KW_MARKER": marker}, marker


def _gone(marker: str) -> bool:
    """No process carries ``marker`` within 5 s (a sandbox dies with its supervisor, a moment after it)."""
    deadline = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not processes_with(marker)


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


def test_autograde_grades_a_submissions_timed_tests_in_one_child_the_forked_in_pooled_ones_the_others_fresh(
        fake_env, monkeypatch):
    """The trusted grader's timed tests (RUN_ALONE) share the submission's child; the untimed ones whose
    requests are forked go to a child per grading thread (two here), each request a fork; the others run in
    fresh children."""
    served, parents = {}, {}

    def timed(name):
        served[name] = ask(fake_env).answer["served"]

    def forked(name):
        answer = fork(fake_env).answer
        served[name], parents[name] = answer["served"], answer["imported_by"]

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", timed)
    monkeypatch.setattr(hidden_tests, "RUN_ALONE", hidden_tests.RUN_ALONE | {"timed"})
    monkeypatch.setattr(autograde, "RUN_ALONE", hidden_tests.RUN_ALONE)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "untimed", timed)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "forked", forked)
    cells = [new_code_cell(f"{test}('{test}{i}')", metadata={"nbgrader": {"grade_id": f"{test}{i}"}})
             for test in ("timed", "untimed", "forked") for i in range(3 if test != "forked" else 6)]
    log = _Log()
    grading = autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=120)
    grading.finish()
    assert served == {"timed0": 1, "timed1": 2, "timed2": 3, "untimed0": 1, "untimed1": 1, "untimed2": 1, 
                      **{f"forked{i}": 1 for i in range(6)}}
    assert "The timed hidden tests ran in 1 grading child(ren)" in log.lines
    children = len(set(parents.values()))
    assert 1 <= children <= 2 and any(f"untimed hidden tests ran in {children} grading child(ren)" in line
                                      for line in log.lines), log.lines


def test_the_timed_tests_preparations_run_side_by_side_before_the_first_of_them_and_each_test_gets_its_own(
        monkeypatch):
    """A timed test's preparation (`graders.hidden_tests.PREPARE`, e.g. a CUDA kernel's compute-sanitizer runs) runs
    before any timed test, several at a time; each test reads what its own preparation returned; a stub is not
    prepared, and a preparation that raises is logged while its test still runs."""
    events, inside, seen, most = [], [], {}, []

    def prepare(name, source="done"):
        inside.append(name)
        most.append(len(inside))
        time.sleep(0.2)
        events.append(f"prepared {name}")
        inside.remove(name)
        if name == "timed1":
            raise RuntimeError("no compute-sanitizer here")
        return f"value of {name}"

    def timed(name, source="done"):
        events.append(f"timed {name}")
        seen[name] = hidden_tests.prepared()

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", timed)
    monkeypatch.setitem(autograde.PREPARE, "timed", hidden_tests._skipping_stubs(prepare))
    monkeypatch.setattr(hidden_tests, "RUN_ALONE", hidden_tests.RUN_ALONE | {"timed"})
    monkeypatch.setattr(autograde, "RUN_ALONE", hidden_tests.RUN_ALONE)
    monkeypatch.setattr(autograde, "preparing_workers", lambda: 2)
    stub = f"__global__ void k()\n{{\n    {hidden_tests.STUB_MARK}\n}}\n"
    cells = [new_code_cell(f"timed('timed{i}')", metadata={"nbgrader": {"grade_id": f"timed{i}"}}) for i in range(3)]
    cells.append(new_code_cell(f"timed('timed3', {stub!r})", metadata={"nbgrader": {"grade_id": "timed3"}}))
    log = _Log()
    grading = autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=120)
    grading.finish()
    assert max(most) == 2   # side by side, two at a time
    assert sorted(events[:3]) == [f"prepared timed{i}" for i in range(3)] and events[3:] == [
        f"timed timed{i}" for i in range(4)]
    assert seen == {"timed0": "value of timed0", "timed1": None, "timed2": "value of timed2", "timed3": None}
    assert "2 of 4 timed hidden tests prepared" in " ".join(log.lines)
    assert any(line.startswith("timed1: not prepared (RuntimeError: no compute-sanitizer here)") for line in log.lines)


def test_the_preparations_start_with_the_grading_beside_the_untimed_tests_and_the_notebooks_run(monkeypatch):
    """Preparations are untimed work: they start when the grading does, while an untimed test runs (this one waits
    for a preparation to begin) and before the notebook has run (`finish` says it has); the timed test waits for
    all three."""
    events, began = [], threading.Event()

    def untimed(name):
        events.append("untimed begins")
        assert began.wait(10), "no preparation began while the untimed test ran"
        events.append("untimed ends")

    def prepare(name, source="done"):
        began.set()
        events.append(f"prepared {name}")
        return name

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "untimed", untimed)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", lambda name, source="done": events.append(f"timed {name}"))
    monkeypatch.setitem(autograde.PREPARE, "timed", hidden_tests._skipping_stubs(prepare))
    monkeypatch.setattr(hidden_tests, "RUN_ALONE", hidden_tests.RUN_ALONE | {"timed"})
    monkeypatch.setattr(autograde, "RUN_ALONE", hidden_tests.RUN_ALONE)
    monkeypatch.setattr(autograde, "preparing_workers", lambda: 1)
    cells = [new_code_cell("untimed('u')", metadata={"nbgrader": {"grade_id": "u"}}),
             new_code_cell("timed('t')", metadata={"nbgrader": {"grade_id": "t"}})]
    grading = autograde._Grading(cells, Submission(new_notebook()), 2, _Log(), time_limit=60)
    deadline = time.monotonic() + 10
    while "untimed ends" not in events and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)   # the notebook is still running: the timed test must wait for it
    assert sorted(events) == ["prepared t", "untimed begins", "untimed ends"], events   # no timed test yet
    grading.finish()
    assert events[-1] == "timed t"


@pytest.mark.parametrize("value, workers", [("", None), ("0", 0), ("3", 3), ("-1", ValueError), ("two", ValueError)])
def test_the_preparations_at_once_are_the_settings_where_it_is_set(monkeypatch, value, workers):
    monkeypatch.setenv("WORKSHOP_PREPARING_WORKERS", value)
    if workers is ValueError:
        with pytest.raises(ValueError, match="WORKSHOP_PREPARING_WORKERS"):
            autograde.preparing_workers()
    elif workers is None:
        assert 1 <= autograde.preparing_workers() <= autograde.PREPARING_AT_MOST
    else:
        assert autograde.preparing_workers() == workers


def test_with_no_preparing_workers_each_timed_test_does_its_own_work(monkeypatch):
    calls = []
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", lambda name: calls.append(("timed", hidden_tests.prepared())))
    monkeypatch.setitem(autograde.PREPARE, "timed", lambda name: calls.append(("prepared", name)))
    monkeypatch.setattr(hidden_tests, "RUN_ALONE", hidden_tests.RUN_ALONE | {"timed"})
    monkeypatch.setattr(autograde, "RUN_ALONE", hidden_tests.RUN_ALONE)
    monkeypatch.setenv("WORKSHOP_PREPARING_WORKERS", "0")
    log = _Log()
    cells = [new_code_cell("timed('t')", metadata={"nbgrader": {"grade_id": "t"}})]
    autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=60).finish()
    assert calls == [("timed", None)]
    assert "1 timed hidden tests not prepared (WORKSHOP_PREPARING_WORKERS=0)" in " ".join(log.lines)

def _timed_tests(monkeypatch, *names: str) -> None:
    """``names`` registered as timed tests (RUN_ALONE) for this test."""
    monkeypatch.setattr(hidden_tests, "RUN_ALONE", hidden_tests.RUN_ALONE | set(names))
    monkeypatch.setattr(autograde, "RUN_ALONE", hidden_tests.RUN_ALONE)


def test_a_tests_calls_with_a_together_handler_are_prepared_at_once_beside_the_other_tests_preparations(monkeypatch):
    """The calls of a test with a together-handler (`graders.hidden_tests.PREPARE_TOGETHER`) are handed to it once,
    in the notebook's order and without a stub's; its per-call preparation does not run; another test's calls are
    prepared one by one beside it; each test reads its own value; a value that is an exception is logged."""
    handed, single, seen = [], [], {}

    def together(calls):
        handed.append(calls)
        return [RuntimeError("no compute-sanitizer here") if args[0] == "timed1" else f"together {args[0]}"
                for args, _ in calls]

    def read(name, source="done"):
        seen[name] = hidden_tests.prepared()

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", read)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "other", read)
    monkeypatch.setitem(autograde.PREPARE, "timed", lambda *a, **k: pytest.fail("prepared alone"))
    monkeypatch.setitem(autograde.PREPARE_TOGETHER, "timed", hidden_tests._skipping_stubs_together(together))
    monkeypatch.setitem(autograde.PREPARE, "other", lambda name, source="done": single.append(name) or f"alone {name}")
    _timed_tests(monkeypatch, "timed", "other")
    monkeypatch.setattr(autograde, "preparing_workers", lambda: 2)
    stub = f"__global__ void k()\n{{\n    {hidden_tests.STUB_MARK}\n}}\n"
    cells = [new_code_cell(f"timed('timed{i}', source='k{i}')", metadata={"nbgrader": {"grade_id": f"timed{i}"}})
             for i in range(3)]
    cells.append(new_code_cell(f"timed('timed3', {stub!r})", metadata={"nbgrader": {"grade_id": "timed3"}}))
    cells += [new_code_cell(f"other('other{i}')", metadata={"nbgrader": {"grade_id": f"other{i}"}}) for i in range(2)]
    log = _Log()
    autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=120).finish()
    assert handed == [[(["timed0"], {"source": "k0"}), (["timed1"], {"source": "k1"}), (["timed2"], {"source": "k2"})]]
    assert sorted(single) == ["other0", "other1"]
    assert seen == {"timed0": "together timed0", "timed1": None, "timed2": "together timed2", "timed3": None,
                    "other0": "alone other0", "other1": "alone other1"}
    together = "timed: 2 of 4 timed hidden tests prepared together in "
    assert any(line.startswith(together) for line in log.lines), log.lines
    assert "timed1: not prepared (RuntimeError: no compute-sanitizer here); its test does that work itself" in log.lines
    assert any(line.startswith("4 of 6 timed hidden tests prepared in ") for line in log.lines), log.lines


def test_an_untimed_tests_calls_are_prepared_together_from_the_start_and_the_other_untimed_tests_run_meanwhile(
        monkeypatch):
    """An untimed test with a together-handler (the puzzles' batched GPU runs): its calls are handed to it once at
    the grading's start; each of its tests waits for the values and reads its own; an untimed test without a
    preparation is not held back by it (it runs while the handler is still at work); the log says "untimed"."""
    events, release, seen = [], threading.Event(), {}

    def together(calls):
        events.append("together begins")
        assert release.wait(10), "the other untimed test did not run while the preparation was under way"
        events.append("together ends")
        return [f"batched {args[0]}" for args, _ in calls]

    def checked(name):
        seen[name] = hidden_tests.prepared()
        events.append(f"checked {name}")

    def plain(name):
        events.append(f"plain {name}")
        release.set()

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "checked", checked)
    monkeypatch.setitem(autograde.HIDDEN_TESTS, "plain", plain)
    monkeypatch.setitem(autograde.PREPARE, "checked", lambda *a, **k: pytest.fail("prepared alone"))
    monkeypatch.setitem(autograde.PREPARE_TOGETHER, "checked", hidden_tests._skipping_stubs_together(together))
    monkeypatch.setattr(autograde, "preparing_workers", lambda: 2)
    cells = [new_code_cell(f"checked('c{i}')", metadata={"nbgrader": {"grade_id": f"c{i}"}}) for i in range(3)]
    cells.append(new_code_cell("plain('p')", metadata={"nbgrader": {"grade_id": "p"}}))
    log = _Log()
    autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=60).finish()
    assert events[:3] == ["together begins", "plain p", "together ends"] or \
        events[:3] == ["plain p", "together begins", "together ends"], events
    assert sorted(events[3:]) == ["checked c0", "checked c1", "checked c2"]
    assert seen == {f"c{i}": f"batched c{i}" for i in range(3)}
    assert any(line.startswith("checked: 3 of 3 untimed hidden tests prepared together in ") for line in log.lines)


def test_a_together_handler_that_raises_leaves_each_call_to_its_own_preparation(monkeypatch):
    seen, single = {}, []

    def broken(calls):
        raise RuntimeError("the batch broke")

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", lambda name: seen.update({name: hidden_tests.prepared()}))
    monkeypatch.setitem(autograde.PREPARE, "timed", lambda name: single.append(name) or f"alone {name}")
    monkeypatch.setitem(autograde.PREPARE_TOGETHER, "timed", hidden_tests._skipping_stubs_together(broken))
    _timed_tests(monkeypatch, "timed")
    monkeypatch.setattr(autograde, "preparing_workers", lambda: 2)
    cells = [new_code_cell(f"timed('t{i}')", metadata={"nbgrader": {"grade_id": f"t{i}"}}) for i in range(3)]
    log = _Log()
    autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=60).finish()
    assert sorted(single) == ["t0", "t1", "t2"] and seen == {f"t{i}": f"alone t{i}" for i in range(3)}
    assert "timed: 3 calls not prepared together (RuntimeError: the batch broke); each is prepared alone" in log.lines
    assert any(line.startswith("3 of 3 timed hidden tests prepared in ") for line in log.lines), log.lines


def test_a_together_handler_must_answer_each_call_once():
    with pytest.raises(ValueError):
        hidden_tests._skipping_stubs_together(lambda calls: calls[:-1])([((1,), {}), ((2,), {})])
    with pytest.raises(ValueError, match="prepare_together needs prepare"):
        hidden_tests.hidden_test(lambda: None, alone=True, prepare_together=lambda calls: calls)


@pytest.mark.parametrize("graded_on, logged", [("NVIDIA H200", True), ("NVIDIA H100 80GB HBM3", False)])
def test_autograde_logs_once_per_track_a_grading_on_another_gpu_than_its_targets(monkeypatch, tmp_path, graded_on,
                                                                                  logged):
    """`graders.targets_gpu.ta_lines`: one warning for the submission's track, not one per kernel; none where the
    grading GPU is the one the targets were measured on."""
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"track": "transpose", "gpu": "NVIDIA H100 80GB HBM3"}))
    spec = dataclasses.replace(load_spec("transpose"), targets="measured", measured_in=(str(record),))

    def timed(kernel_id):
        answer = {"status": "ok", "timing": {"ratio": 0.5}, "environment": {"gpu": graded_on}}
        publish(result_from_child(ChildResult("ok", answer=answer), spec, spec.kernel(kernel_id), 10, seed=1))

    monkeypatch.setitem(autograde.HIDDEN_TESTS, "timed", timed)
    _timed_tests(monkeypatch, "timed")
    cells = [new_code_cell(f"timed('{k}')", metadata={"nbgrader": {"grade_id": k}}) for k in ("naive", "padded")]
    log = _Log()
    autograde._Grading(cells, Submission(new_notebook()), 2, log, time_limit=60).finish()
    said = [line for line in log.lines if "speed targets measured on" in line]
    assert said == ([f"transpose: speed targets measured on NVIDIA H100 80GB HBM3, this grading ran on {graded_on}: "
                     "speed points compare against another GPU's references. Re-measure them on this GPU: `bash "
                     "benchmarks/gpu_trusted.sh regrade transpose`, then `workshop targets transpose RECORD... "
                     "--write`"] if logged else [])


def fork(env, **request):
    return run_child(SERVED, request, timeout_s=30, env=env, forked=True)


def test_forked_requests_each_start_from_the_untouched_serving_process(fake_env):
    with ChildSession() as session:
        answers = [fork(fake_env).answer for _ in range(3)]
        assert [a["served"] for a in answers] == [1, 1, 1]   # what one request changed is gone for the next
        assert len({a["pid"] for a in answers}) == 3 and len({a["imported_by"] for a in answers}) == 1
        assert session.started == 1
        assert ask(fake_env).answer["served"] == 1 and session.started == 2   # not a fork: a child of its own


def test_a_forked_request_leaves_no_file_or_process_to_the_next(fake_env):
    marker = f"kw-left-{uuid.uuid4().hex[:12]}"
    with ChildSession() as session:
        first = fork(fake_env, leave=marker)
        assert first.ok and first.answer["scratch"].count(marker) == 2    # in /tmp and /dev/shm
        assert not processes_with(marker)    # killed before the answer came back
        assert marker not in fork(fake_env).answer["scratch"] and session.started == 1


def test_a_module_a_forked_request_plants_in_its_working_directory_is_never_imported(fake_env):
    name = f"kw_planted_{uuid.uuid4().hex[:12]}"
    with ChildSession():
        assert fork(fake_env, plant=name, **{"import": name}).answer["imported"] is False
        assert fork(fake_env, **{"import": name}).answer["imported"] is False
    assert run_child(SERVED, {"plant": name, "import": name}, timeout_s=30, env=fake_env).answer["imported"] is True


def test_a_forked_request_that_dies_or_answers_too_much_is_a_crash_and_the_child_serves_on(fake_env):
    with ChildSession() as session:
        died = fork(fake_env, exit=3)
        assert died.status == "crashed" and "exited with status 3" in died.message
        big = fork(fake_env, pad="y" * capped_output.ANSWER_BYTES)
        assert big.status == "crashed" and f"larger than {capped_output.ANSWER_BYTES} bytes" in big.message
        assert fork(fake_env).ok and session.started == 1
        late = run_child(SERVED, {"sleep_s": 60}, timeout_s=2, env=fake_env, forked=True)
        assert late.status == "timeout" and fork(fake_env).ok and session.started == 2


def test_only_forked_requests_go_to_a_pools_sessions(fake_env):
    env, marker = _marked(fake_env, "pool")
    with SessionPool() as pool:
        with pool.lease() as held:
            assert current() is None and current(forked=True) is held
            assert ask(env).answer["served"] == ask(env).answer["served"] == 1    # fresh children
            assert fork(env).ok and fork(env).ok and held.started == 1
        assert current(forked=True) is None
    assert _gone(marker)


def test_a_notebooks_checks_are_forks_of_one_child_kept_for_its_process(fake_env):
    """`process_session`: forked requests of separate calls share one serving child (a fork each), other requests
    get fresh children, and inside a grader's session that session serves."""
    with process_session():
        first = fork(fake_env).answer
        assert ask(fake_env).answer["served"] == 1 and current() is None
    with process_session():
        second = fork(fake_env).answer
    assert first["imported_by"] == second["imported_by"] and first["pid"] != second["pid"]
    with ChildSession() as grading, process_session():
        assert fork(fake_env).answer["imported_by"] != first["imported_by"] and grading.started == 1


def test_the_notebooks_child_ends_with_its_process(fake_env):
    env, marker = _marked(fake_env, "notebook")
    script = ("import json, sys\nfrom graders.sandbox.run import run_child\n"
              "from graders.sandbox.session import process_session\n"
              "with process_session():\n"
              f"    print(run_child({SERVED!r}, {{}}, timeout_s=30, env=json.loads(sys.argv[1]), forked=True).status)\n"
              "from tests.processes import processes_with\n"
              f"print(len(processes_with({marker!r})) > 0)")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(env)], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == ["ok", "True"], done.stdout + done.stderr   # alive until its process ends
    assert _gone(marker)
