"""Which compute-sanitizer tools a CUDA kernel is checked with, and where: a spec's ``sanitizer_tools`` (any of
memcheck, racecheck, initcheck, synccheck; the first three by default) and ``sanitize_shape`` (else the smallest check
shape of two blocks or more), each read from the spec at its edges and handed to the sanitizer as read."""
from __future__ import annotations

import pytest
from test_cuda_spec_rules import K1, TOP, error, spec_with
from test_grade_rules import ok_result

from graders.cuda_engine import grade, sanitizer
from graders.cuda_engine.spec import DEFAULT_SANITIZER_TOOLS, SANITIZER_TOOLS


def test_by_default_three_tools_at_the_smallest_check_shape_of_two_blocks():
    kernel = spec_with(top={"check_shapes": [[4, 4], [33, 65], [64, 64]]}).kernel("k")
    assert kernel.sanitizer_tools == DEFAULT_SANITIZER_TOOLS == ("memcheck", "racecheck", "initcheck")
    assert kernel.sanitize_shape is None
    assert sanitizer.sanitize_shape(kernel, kernel.geometry) == sanitizer.public_shape(kernel, kernel.geometry) == (33, 65)


def test_the_tools_are_inherited_from_the_assignment_and_kept_in_the_tools_order():
    spec = spec_with(top={"sanitizer_tools": ["synccheck", "memcheck"]})
    assert spec.kernel("k").sanitizer_tools == ("memcheck", "synccheck")
    assert spec_with(kernel={"sanitizer_tools": list(SANITIZER_TOOLS)}).kernel("k").sanitizer_tools == SANITIZER_TOOLS
    assert spec_with(kernel={"sanitizer_tools": []}).kernel("k").sanitizer_tools == ()


@pytest.mark.parametrize("tools", [["memcheck", "memcheck"], ["leakcheck"], "memcheck", [1]])
def test_a_tool_list_that_is_not_distinct_known_tools_is_refused(tools):
    allowed = "['memcheck', 'racecheck', 'initcheck', 'synccheck']"
    assert error(kernel={"sanitizer_tools": tools}) == (
        f"{K1}: sanitizer_tools must be a list of distinct tools among {allowed}, got {tools!r}")


def test_a_sanitize_shape_is_a_shape_of_the_kinds_rank_and_the_sanitizer_runs_there():
    kernel = spec_with(kernel={"sanitize_shape": [100, 3]}).kernel("k")
    assert sanitizer.sanitize_shape(kernel, kernel.geometry) == (100, 3)
    assert sanitizer.public_shape(kernel, kernel.geometry) == (4, 4)   # the only check shape: one block
    assert error(kernel={"sanitize_shape": [100]}) == f"{K1} sanitize_shape: expected a list of 2 positive ints, got [100]"
    assert "unknown key(s) ['sanitize_shape']" in error(top={"sanitize_shape": [4, 4]})
    assert TOP in error(top={"sanitize_shape": [4, 4]})


@pytest.mark.parametrize("shared_bytes, expected", [(0, ("memcheck", "synccheck")),
                                                     (1024, ("memcheck", "racecheck", "synccheck"))])
def test_the_grader_hands_the_specs_tools_to_the_sanitizer_racecheck_only_with_shared_memory(
        monkeypatch, shared_bytes, expected):
    kernel = spec_with(kernel={"sanitizer_tools": ["memcheck", "racecheck", "synccheck"]}).kernel("k")
    calls = []
    checked = {"shape": [4, 4], "tools": {}, "failure": ""}
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args: calls.append(args) or checked)
    found = ok_result({"compile": {"resources": {"k_fn": {"shared_bytes": shared_bytes}}}})
    grade.sanitized(found, kernel, {"source": "s"}, kernel.geometry)
    assert calls == [({"source": "s"}, kernel, kernel.geometry, grade._child_env(), expected)]


SYNCCHECK = """========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at chunked_sum+0x2b0
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""


def test_synccheck_reports_are_read_in_its_own_words():
    assert sanitizer.findings("synccheck", SYNCCHECK) == (
        "compute-sanitizer --tool synccheck found 1 error(s); the first: Barrier error detected. Divergent thread(s) "
        "in block")
