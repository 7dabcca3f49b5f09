"""The defaults the trust model rests on, each pinned by a test that fails once the default goes: a grading child
is process-capped without being asked to be, a graded test cell keeps none of the notebook's own outputs or
metadata, a child's answer comes from its private pipe and never from what it prints, and no process that grades
has the submission folder on its ``sys.path``.

These run the trusted grader's preprocessors (`graders.autograde`) on a notebook in this process, with hidden tests
of their own, and real sandboxed children (bubblewrap, CPU only)."""
from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbgrader.utils import determine_grade

from graders import hidden_tests
from graders.autograde import RESULTS_KEY, StartTrustedGrading, TrustedGrades
from graders.hidden_tests import HIDDEN_TESTS
from graders.sandbox import confine
from graders.sandbox.run import run_child

FORKS = 1500   # more than any process cap, few enough for a machine without one

FORK_BOMB = textwrap.dedent('''
    import os, time
    def handle(request):
        """Fork up to ``forks`` sleeping children; say how many started and why the next one did not."""
        started = 0
        try:
            for _ in range(request["forks"]):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                started += 1
        except OSError as exc:
            return {"started": started, "refused": str(exc)}
        return {"started": started, "refused": ""}
''')

FORGED = json.dumps({"test": "map", "status": "ok", "forged": True})
FORGER = textwrap.dedent(f'''
    import atexit, sys
    FORGED = {FORGED!r}
    def handle(request):
        """Print a forged answer before and after the real one is sent, on stdout and stderr."""
        print(FORGED, flush=True)
        sys.stderr.write(FORGED + "\\n")
        atexit.register(print, FORGED)
        return {{"test": "map", "status": "incorrect"}}
''')

PROBE = textwrap.dedent('''
    import importlib.util, os, sys
    def handle(request):
        return {"path": sys.path, "cwd": os.getcwd(), "shadow": importlib.util.find_spec("kw_shadow") is not None}
''')


@pytest.fixture
def handlers(tmp_path, monkeypatch) -> Path:
    """A folder of child handler modules, on PYTHONPATH (so a child started with default arguments finds them)."""
    folder = tmp_path / "handlers"
    folder.mkdir()
    for name, text in (("fork_bomb", FORK_BOMB), ("forger", FORGER), ("sys_path_probe", PROBE)):
        (folder / f"{name}.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(folder))
    return folder


@pytest.fixture(params=["cgroup", "fallback"])
def caps(request, monkeypatch):
    """With the caps this machine's cgroups give, and with the supervisor's fallbacks (no cgroup)."""
    if request.param == "cgroup" and not confine.cgroup_parents():
        pytest.skip("no writable cgroup here")
    if request.param == "fallback":
        monkeypatch.setenv("WORKSHOP_SANDBOX_CGROUPS", "off")
    return request.param


def test_a_child_started_with_default_arguments_is_process_capped(handlers, caps):
    """`run_child` given no cap: the fork bomb is refused at the cap (pids cgroup, RLIMIT_NPROC) or the sandbox
    is killed with a line naming the cap (root without a pids cgroup: the supervisor counts)."""
    result = run_child("fork_bomb", {"forks": FORKS}, timeout_s=60)
    if result.ok:
        assert result.answer["started"] < FORKS and "Resource temporarily unavailable" in result.answer["refused"], \
            result.answer
    else:
        assert re.search(r"more than \d+ processes", result.message), result.message


def test_the_answer_comes_from_the_private_pipe_not_from_what_the_child_prints(handlers):
    result = run_child("forger", {}, timeout_s=60)
    assert result.ok, result.message
    assert result.answer == {"test": "map", "status": "incorrect"}
    assert FORGED in result.stdout   # printed, and ignored


# --- the trusted grader's preprocessors, on a notebook in this process -------------------------------------

def _test_cell(grade_id: str, source: str, points: float) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": grade_id,
                                 "points": points, "schema_version": 3}
    return cell


def _autograde(nb: nbformat.NotebookNode, folder: Path, notebook_run=lambda nb: None) -> None:
    """What nbgrader's autograde does around the notebook's run: `StartTrustedGrading`, then the run
    (``notebook_run`` changes the cells as the student's kernel would), then `TrustedGrades`."""
    resources = {"nbgrader": {"assignment": "unit", "notebook": "unit"}, "metadata": {"path": str(folder)}}
    nb, resources = StartTrustedGrading().preprocess(nb, resources)
    notebook_run(nb)
    TrustedGrades().preprocess(nb, resources)


@pytest.fixture
def trusted_grader(monkeypatch):
    """Leaves the module's "inside the trusted grader" flag and its registry as they were."""
    monkeypatch.setattr(hidden_tests, "_in_trusted_grader", False)
    return monkeypatch


def test_a_graded_cell_keeps_none_of_the_notebooks_own_outputs_or_metadata(trusted_grader, tmp_path):
    """The notebook made a failing test cell print a number (nbgrader scores a cell by its first number or
    error) and a passing one raise, and forged both cells' results: only the verdicts remain."""
    def verdict(kind: str) -> None:
        print(f"graded {kind}")
        if kind == "fail":
            raise hidden_tests.TestFailed("the kernel is wrong")

    trusted_grader.setitem(HIDDEN_TESTS, "verdict", verdict)
    nb = new_notebook(cells=[_test_cell("fails", "verdict('fail')", 2), _test_cell("passes", "verdict('pass')", 1)])
    own = {"fails": [new_output("stream", name="stdout", text="forged\n"),
                     new_output("execute_result", data={"text/plain": "2.0"}, execution_count=1)],
           "passes": [new_output("error", ename="AssertionError", evalue="no", traceback=[])]}

    def notebook_run(nb):
        for cell in nb.cells:
            cell.outputs = list(own[cell.metadata.nbgrader.grade_id])
            cell.metadata[RESULTS_KEY] = {"results": [{"test": "map", "status": "ok", "points": 2.0}]}

    _autograde(nb, tmp_path, notebook_run)
    fails, passes = nb.cells
    for cell in nb.cells:
        assert not [o for o in cell.outputs if o in own["fails"] + own["passes"]], cell.outputs
        assert cell.metadata[RESULTS_KEY] == {"results": []}
    assert [(o.output_type, o.get("text", o.get("evalue"))) for o in fails.outputs] == [
        ("stream", "graded fail\n"), ("error", "the kernel is wrong")]
    assert [(o.output_type, o.get("text")) for o in passes.outputs] == [("stream", "graded pass\n")]
    assert determine_grade(fails) == (0, 2) and determine_grade(passes) == (1, 1)


def test_no_process_that_grades_has_the_submission_folder_on_sys_path(trusted_grader, handlers, tmp_path):
    """A hidden test in nbgrader's process (this one) and the sandboxed child it starts with default arguments
    look for a module handed in beside the notebook, and at their ``sys.path``."""
    folder = tmp_path / "autograded" / "student" / "unit"
    folder.mkdir(parents=True)
    (folder / "kw_shadow.py").write_text("SHADOWED = True\n")
    seen = {}

    def where_am_i() -> None:
        import importlib.util
        seen["grader"] = {"path": list(sys.path), "cwd": os.getcwd(),
                          "shadow": importlib.util.find_spec("kw_shadow") is not None}
        child = run_child("sys_path_probe", {}, timeout_s=60)
        assert child.ok, child.message
        seen["child"] = child.answer

    trusted_grader.setitem(HIDDEN_TESTS, "where_am_i", where_am_i)
    nb = new_notebook(cells=[_test_cell("where", "where_am_i()", 1)])
    _autograde(nb, folder)
    assert determine_grade(nb.cells[0]) == (1, 1) and set(seen) == {"grader", "child"}, nb.cells[0].outputs
    for process, view in seen.items():
        on_path = {Path(view["cwd"], entry).resolve() for entry in view["path"]}
        assert folder.resolve() not in on_path and not view["shadow"], (process, view)
