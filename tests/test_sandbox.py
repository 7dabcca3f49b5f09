"""The child-process runner: answers, time limits, crashes and memory limits end as results, never hangs."""
import sys
import time
import textwrap

import pytest

from graders.sandbox import run_child

HANDLER = textwrap.dedent('''
    import os
    def handle(request):
        what = request["what"]
        print("student noise on stdout")
        if what == "hang":
            while True:
                pass
        if what == "raise":
            raise ValueError("bad input")
        if what == "exit":
            os._exit(3)
        if what == "allocate":
            return {"n": len(bytearray(8 << 30))}
        return {"echo": what}
''')


@pytest.fixture
def handler(tmp_path, monkeypatch):
    (tmp_path / "fake_handler.py").write_text(HANDLER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sys.path.insert(0, str(tmp_path))
    yield "fake_handler"
    sys.path.remove(str(tmp_path))


def test_answer_comes_back_on_the_private_channel_not_stdout(handler):
    result = run_child(handler, {"what": "hello"}, timeout_s=10)
    assert result.ok and result.answer == {"echo": "hello"}


def test_hanging_child_is_stopped_within_its_limit(handler):
    start = time.monotonic()
    result = run_child(handler, {"what": "hang"}, timeout_s=1.5)
    assert result.status == "timeout" and "1.5 s" in result.message
    assert time.monotonic() - start < 5


def test_exception_in_handler_is_an_answer(handler):
    result = run_child(handler, {"what": "raise"}, timeout_s=10)
    assert result.ok and result.answer["error"] == "ValueError: bad input"


def test_dying_child_is_reported_as_crashed(handler):
    result = run_child(handler, {"what": "exit"}, timeout_s=10)
    assert result.status == "crashed" and "status 3" in result.message


def test_memory_limit_stops_a_huge_allocation(handler):
    result = run_child(handler, {"what": "allocate"}, timeout_s=10, memory_bytes=2 << 30)
    assert result.answer["error"].startswith("MemoryError")
