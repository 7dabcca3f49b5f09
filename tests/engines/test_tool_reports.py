"""Reading NVIDIA's tools' reports (`graders.cuda_engine.counters.parse_csv`, `graders.cuda_engine.sanitizer.findings`)
and choosing the sanitizer's shape (`sanitize_shape`), each rule at its edge with the exact result or message."""
from __future__ import annotations

import dataclasses
import math

import pytest

from graders.cuda_engine import counters, sanitizer
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec

LD, ST = counters.METRICS["shared_bank_conflicts"][0]
HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def row(kernel: str, metric: str, value: str) -> str:
    return f'"0","{kernel}","{metric}","","{value}"'


# --- ncu's CSV ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, count", [("0", 0), ("7", 7), ("1,234,567", 1234567), ("12.9", 12), ("1e3", 1000)])
def test_a_metric_value_is_read_as_a_whole_count(value, count):
    assert counters.parse_csv("\n".join([HEADER, row("k", LD, value)]), (LD,)) == {"k": {LD: count}}


def test_only_quoted_lines_are_read_and_only_the_metrics_asked_for():
    text = "\n".join(["==PROF== Connected to process 7", HEADER, "printf from the kernel", row("k(float*)", LD, "3"),
                      row("k(float*)", "sm__cycles_elapsed.avg", "99"), row("other", ST, "4"),
                      ' "a quoted line that does not start the line",""', "==PROF== Disconnected"])
    assert counters.parse_csv(text, (LD, ST)) == {"k(float*)": {LD: 3}, "other": {ST: 4}}
    assert counters.parse_csv(text, ()) == {}
    assert counters.parse_csv("", (LD,)) == {}


def test_the_same_metric_of_two_kernels_is_not_a_repeat_but_of_one_kernel_twice_is():
    both = "\n".join([HEADER, row("a", LD, "1"), row("b", LD, "2"), row("a", ST, "3")])
    assert counters.parse_csv(both, (LD, ST)) == {"a": {LD: 1, ST: 3}, "b": {LD: 2}}
    with pytest.raises(counters.ProfilingFailed) as raised:
        counters.parse_csv(both + "\n" + row("b", LD, "0"), (LD, ST))
    assert str(raised.value) == f"ncu's output has {LD} of b twice"


def test_rows_without_a_metric_name_are_skipped():
    text = "\n".join(['"ID","Kernel Name"', '"0","k"'])
    assert counters.parse_csv(text, (LD,)) == {}


# --- compute-sanitizer's report ---------------------------------------------------------------------------

SUMMARY = "========= ERROR SUMMARY: {} error{}"
RACES = "========= RACECHECK SUMMARY: 3 hazards displayed ({} error{}, 2 warnings)"


@pytest.mark.parametrize("summary", [SUMMARY, RACES])
@pytest.mark.parametrize("count", [0, 1, 2])
def test_the_count_is_the_summarys_and_zero_is_clean(summary, count):
    report = "\n".join(["========= COMPUTE-SANITIZER", "========= Invalid __global__ read of size 4 bytes",
                        summary.format(count, "" if count == 1 else "s")])
    found = sanitizer.findings("memcheck", report)
    assert found == ("" if count == 0 else f"compute-sanitizer --tool memcheck found {count} error(s); the first: "
                     "Invalid __global__ read of size 4 bytes")


@pytest.mark.parametrize("finding", ["Race reported between Write access at k+0x10", "Invalid __shared__ write",
                                     "Uninitialized __global__ memory read", "Out of bounds access",
                                     "Misaligned address", "Barrier error detected", "Error: Race reported x",
                                     "Error: Invalid read"])
def test_each_kind_of_finding_is_quoted_in_the_tools_words(finding):
    report = f"========= COMPUTE-SANITIZER\n========= {finding}  \n=========     at k+0x10\n" + \
        SUMMARY.format(1, "")
    assert sanitizer.findings("racecheck", report) == (f"compute-sanitizer --tool racecheck found 1 error(s); the "
                                                       f"first: {finding}")


def test_the_first_finding_is_quoted_and_other_lines_are_not_findings():
    report = "\n".join(["========= Warning: Race reported between Read access", "x ========= Invalid in a printf",
                        "========= Program hit cudaErrorLaunchFailure", "========= Invalid first",
                        "========= Invalid second", SUMMARY.format(2, "s")])
    assert sanitizer.findings("memcheck", report).endswith("; the first: Invalid first")
    bare = sanitizer.findings("memcheck", "========= Program hit an error\n" + SUMMARY.format(1, ""))
    assert bare == "compute-sanitizer --tool memcheck found 1 error(s); the first: see the sanitizer's report"


def test_the_largest_count_wins_over_a_summary_the_kernel_printed():
    report = "\n".join([SUMMARY.format(0, "s"), "========= Invalid write", SUMMARY.format(3, "s"),
                        RACES.format(1, "")])
    assert sanitizer.findings("memcheck", report).startswith("compute-sanitizer --tool memcheck found 3 error(s)")


@pytest.mark.parametrize("report", ["", "ERROR SUMMARY: 1 error", " ========= ERROR SUMMARY: 1 error",
                                    "========= ERROR SUMMARY: some errors"])
def test_a_report_without_a_summary_line_is_the_graders_failure(report):
    with pytest.raises(sanitizer.SanitizerFailed) as raised:
        sanitizer.findings("initcheck", report)
    assert str(raised.value) == f"compute-sanitizer --tool initcheck printed no summary: {report[-500:]!r}"


def test_the_report_quoted_in_a_failure_is_its_last_500_characters():
    report = "x" * 600 + "y" * 500
    with pytest.raises(sanitizer.SanitizerFailed) as raised:
        sanitizer.findings("memcheck", report)
    assert str(raised.value).endswith(f"{'y' * 500!r}")


# --- the sanitizer's shape ------------------------------------------------------------------------------

TRANSPOSE = load_spec("transpose")


@pytest.mark.parametrize("shapes, chosen", [
    (((1, 1), (32, 33), (64, 64)), (32, 33)),        # (32, 33): exactly two blocks of 32 x 32
    (((64, 64), (32, 33), (1, 1)), (32, 33)),        # in any order
    (((1, 1), (33, 32), (32, 32)), (33, 32)),        # two blocks on the other axis
    (((32, 32), (1, 1), (16, 32)), (32, 32)),        # one block each: the largest
    (((32, 64), (40, 40)), (40, 40)),                # the fewest elements, not the first listed
])
def test_the_sanitizer_runs_at_the_smallest_shape_of_two_blocks_else_the_largest(shapes, chosen):
    kernel = dataclasses.replace(TRANSPOSE.kernel("padded"), check_shapes=shapes)
    geometry = kernel.geometry
    assert geometry.tile == (32, 32)
    assert sanitizer.sanitize_shape(kernel, geometry) == chosen
    blocks = math.prod(problem("transpose").grid(chosen, geometry.tile))
    assert blocks >= 2 or all(math.prod(problem("transpose").grid(s, geometry.tile)) < 2 for s in shapes)
