"""A submission's kernels checked by compute-sanitizer together (`graders.cuda_engine.grade.prepare_together`: one
child per tool for all of them) on a real GPU: the gemm references come out as they do one by one, every tool's
batch clearing all ten; a racy reduction among the debugging track's fixed kernels sends racecheck back to each
kernel alone, and the race is that kernel's finding only.
Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_sanitizer_batch_gpu.py -s``."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from graders.cuda_engine import grade, sanitizer
from graders.cuda_engine.spec import load_spec

pytestmark = pytest.mark.gpu
AT_ONCE = 4   # preparations one by one, as many at a time as the trusted grader runs (`PREPARING_AT_MOST`)


def calls(track: str, kernel_ids=None, **sources: str) -> list[tuple[tuple, dict]]:
    """`score`'s calls of ``track``'s references (``sources``: another source for a kernel), without ncu."""
    spec = load_spec(track)
    return [((track, k, sources.get(k) or spec.kernel(k).reference.read_text()), {"profile": False})
            for k in kernel_ids or spec.kernels]


def one_by_one(prepared_calls) -> list[dict]:
    with ThreadPoolExecutor(AT_ONCE) as pool:
        return list(pool.map(lambda call: grade.prepare(*call[0], **call[1]), prepared_calls))


def test_the_gemm_references_checked_together_have_the_findings_they_have_one_by_one():
    gemm = calls("gemm")
    started = time.monotonic()
    together = grade.prepare_together(gemm)
    together_s = time.monotonic() - started
    started = time.monotonic()
    alone = one_by_one(gemm)
    print(f"\n10 gemm references: together {together_s:.1f} s, one by one ({AT_ONCE} at a time) "
          f"{time.monotonic() - started:.1f} s")
    for (args, _), mine, own in zip(gemm, together, alone):
        print(args[1], mine["checked"]["seconds"], mine["checked"]["batched"])
        assert mine["checked"]["tools"] == own["checked"]["tools"] == dict.fromkeys(sanitizer.TOOLS, ""), args[1]
        assert mine["checked"]["batched"] == dict.fromkeys(sanitizer.TOOLS, len(gemm))


def test_a_race_in_a_batch_is_found_and_is_that_kernels_finding_alone():
    """barrier_at_check_shape races at the sanitizer's shape (4097 columns); it is second of four kernels, so the
    batch's filter must watch a kernel that is neither its first nor its last name."""
    spec = load_spec("debugging")
    racy = (spec.path.parent / "solutions/wrong/barrier_at_check_shape.cu").read_text()
    order = ["copy", "reduce", "softmax", "chunked"]
    together = dict(zip(order, grade.prepare_together(calls("debugging", order, reduce=racy))))
    for kernel_id, value in together.items():
        print(f"\n{kernel_id}", value["checked"])
    reduce = together["reduce"]["checked"]
    assert reduce["failure"].startswith("compute-sanitizer --tool racecheck found "), reduce
    assert reduce["tools"]["racecheck"] == reduce["failure"] and "racecheck" not in reduce["batched"]
    assert reduce["batched"] == {"memcheck": 4, "initcheck": 4, "synccheck": 4}
    for kernel_id in ("copy", "softmax", "chunked"):
        checked = together[kernel_id]["checked"]
        assert checked["failure"] == "" and checked["batched"] == {t: 4 for t in checked["tools"] if t != "racecheck"}
    (alone,) = one_by_one(calls("debugging", ["reduce"], reduce=racy))
    assert alone["checked"]["tools"]["racecheck"].startswith("compute-sanitizer --tool racecheck found ")
    found = {tool: bool(finding) for tool, finding in reduce["tools"].items()}
    assert {tool: bool(finding) for tool, finding in alone["checked"]["tools"].items()} == found
