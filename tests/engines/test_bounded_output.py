"""Every byte and every configuration from student code into the grader's process is bounded: a grading child's
stdout, stderr and answer (graders/sandbox/capped_output.py), a search space before it is expanded
(graders/cuda_engine/structure.py), the submitted notebook before it is parsed (graders/submission.py), and the
notebook's outputs while it runs and the hidden tests' texts (graders/autograde.py). Each cap says which it is."""
from __future__ import annotations

import sys
import textwrap
import time
import tracemalloc

import pytest

from graders.cuda_engine import structure
from graders.sandbox import capped_output
from graders.sandbox.run import run_child

MIB = 1 << 20

FLOOD_HANDLER = textwrap.dedent('''
    import os
    def handle(request):
        block = b"x" * (1 << 20)
        while request["forever"] or request["mib"]:
            for fd in request["fds"]:
                os.write(fd, block)
            request["mib"] -= 1
        return {"big": "y" * request["answer"]}
''')


@pytest.fixture
def flood(tmp_path, monkeypatch):
    (tmp_path / "flood_handler.py").write_text(FLOOD_HANDLER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sys.path.insert(0, str(tmp_path))
    yield "flood_handler"
    sys.path.remove(str(tmp_path))


def _traced(call):
    """(what ``call()`` returns, the peak of this process's Python allocations while it ran)."""
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- a grading child's output -------------------------------------------------------------------------

def test_a_child_flooding_stdout_and_stderr_leaves_the_parent_bounded_and_says_what_was_dropped(flood):
    request = {"forever": False, "mib": 256, "fds": [1, 2], "answer": 10}
    result, peak = _traced(lambda: run_child(flood, request, timeout_s=60))
    assert result.ok and result.answer == {"big": "y" * 10}
    assert peak < 4 * MIB, f"the parent's allocations peaked at {peak / MIB:.1f} MiB for 512 MiB of output"
    for text, name in ((result.stdout, "stdout"), (result.stderr, "stderr")):
        note, kept = text.split("\n", 1)
        assert note == (f"[{256 * MIB - capped_output.TAIL_BYTES} bytes dropped: the grader keeps the last "
                        f"{capped_output.TAIL_BYTES} bytes of a grading child's {name}]")
        assert kept == "x" * capped_output.TAIL_BYTES


def test_an_answer_over_the_cap_is_a_crash_that_names_the_cap(flood):
    request = {"forever": False, "mib": 0, "fds": [], "answer": capped_output.ANSWER_BYTES}   # with its JSON: more
    result, peak = _traced(lambda: run_child(flood, request, timeout_s=60))
    assert result.status == "crashed"
    assert result.message == (f"the answer was larger than {capped_output.ANSWER_BYTES} bytes (the cap on a "
                              "grading child's answer)")
    assert peak < capped_output.ANSWER_BYTES + 2 * MIB
    request["answer"] = capped_output.ANSWER_BYTES - 20   # {"big": "..."} is 11 bytes more: within the cap
    assert run_child(flood, request, timeout_s=60).ok


def test_a_child_that_floods_until_its_deadline_is_killed_at_it(flood):
    start = time.monotonic()
    result = run_child(flood, {"forever": True, "mib": 0, "fds": [1], "answer": 0}, timeout_s=2)
    assert result.status == "timeout" and "stopped after 2 s" in result.message
    assert time.monotonic() - start < 2 + capped_output.GRACE_S


def test_a_tail_keeps_the_end_and_counts_the_rest():
    tail = capped_output.Tail(cap=8)
    for chunk in (b"0123", b"456789abcdef", b"", b"gh"):
        tail.feed(chunk)
    assert (tail.data, tail.total, tail.dropped) == (b"abcdefgh", 18, 10)
    assert tail.text("stdout") == ("[10 bytes dropped: the grader keeps the last 8 bytes of a grading child's stdout]\n"
                                   "abcdefgh")
    short = capped_output.Tail(cap=8)
    short.feed(b"ok\n")
    assert short.text("stderr") == "ok\n"


def test_capped_text_keeps_the_start_and_says_what_was_dropped():
    text = capped_output.CappedText(10, "a hidden test's report")
    for part in ("0123456", "789abc", "def"):
        print(part, end="", file=text)
    assert text.getvalue() == "0123456789\n[6 more characters dropped: a hidden test's report is capped at 10]\n"
    assert capped_output.shorten("abcdef", 6, "x") == "abcdef"
    assert capped_output.shorten("abcdefg", 6, "an error") == (
        "abcdef [1 more characters dropped: an error is capped at 6]")


# --- search spaces ------------------------------------------------------------------------------------

RULES = structure.load_structure("gemm").autotune


def test_a_huge_search_space_is_refused_from_its_lengths_without_being_expanded(monkeypatch):
    monkeypatch.setattr(structure, "inspect_launches", lambda *a, **k: pytest.fail("nothing may be compiled"))
    space = {key: list(range(4, 404, 4)) for key in structure.TUNABLE}   # 100 a key: 10^10 configurations
    start = time.monotonic()
    (problems, valid), peak = _traced(lambda: structure.search_problems("gemm", "src", space, {}))
    assert time.monotonic() - start < 1 and peak < MIB
    assert valid == [] and problems == [
        f"the search space lists {100 ** 5} configurations (100 x 100 x 100 x 100 x 100 values of BM, BN, BK, TM, "
        f"TN); the grader expands at most {structure.MAX_SPACE}"]


def test_a_search_space_is_expanded_up_to_its_cap_exactly():
    space = {"BM": [128] * 16, "BN": [128] * 16, "BK": [8] * 16, "TM": [8], "TN": [8]}
    assert 16 ** 3 == structure.MAX_SPACE and len(structure.expand_space(space)) == structure.MAX_SPACE
    space["TN"] = [8, 4]
    with pytest.raises(ValueError, match=f"lists {2 * structure.MAX_SPACE} configurations .*at most "
                                         f"{structure.MAX_SPACE}"):
        structure.expand_space(space)


def test_autotune_refuses_a_space_of_more_valid_configurations_than_the_rules_allow_before_grading_any(monkeypatch):
    import graders.cuda_engine.grade as grade
    monkeypatch.setattr(grade, "grade_kernel", lambda *a, **k: pytest.fail("nothing may be graded"))
    tm_tn = [4, 8, 16, 32]
    space = {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16, 32], "TM": tm_tn, "TN": tm_tn}
    valid = sum(not structure.config_problem(c, RULES) for c in structure.expand_space(space))
    assert valid > RULES.max_configs
    with pytest.raises(ValueError) as refused:
        structure.autotune("gemm", "src", space)
    assert str(refused.value) == (f"the search space has {valid} valid configurations; at most {RULES.max_configs} "
                                  "(the autotuning rules' max_configs)")
