"""Reading NVIDIA's tools' reports (`graders.cuda_engine.counters.parse_csv`, `graders.cuda_engine.sanitizer.findings`)
and choosing the sanitizer's shape (`sanitize_shape`), each rule at its edge with the exact result or message."""
from __future__ import annotations

import dataclasses
import math

import pytest

from graders.cuda_engine import counters, sanitizer, sass
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec
from graders.sandbox.run import ChildResult

LD, ST = counters.METRICS["shared_bank_conflicts"][0]
HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def row(kernel: str, metric: str, value: str) -> str:
    return f'"0","{kernel}","{metric}","","{value}"'


# --- ncu's CSV ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, count", [("0", 0), ("7", 7), ("1,234,567", 1234567), ("12.9", 12), ("1e3", 1000)])
def test_a_metric_value_is_read_as_a_whole_count(value, count):
    assert counters.parse_csv("\n".join([HEADER, row("k", LD, value)]), (LD,)) == {"k": {LD: count}}


@pytest.mark.parametrize("value", ["n/a", "", "(!) n/a"])
def test_a_value_that_is_not_a_number_is_the_profilers_failure_naming_the_metric_and_kernel(value):
    """ncu writes n/a for a metric the GPU does not collect (ldmatrix's bank conflicts on an H200)."""
    text = "\n".join([HEADER, row("k(float*)", LD, value)])
    assert counters.raw_values(text, (LD,)) == {"k(float*)": {LD: value}}
    with pytest.raises(counters.ProfilingFailed) as raised:
        counters.parse_csv(text, (LD,))
    assert str(raised.value) == f"ncu gave {value!r} for {LD} of k(float*): this GPU does not count it"


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


# --- ncu's run: what the profiled child is given, and which row is the kernel's ----------------------------

@pytest.fixture
def ncu_child(monkeypatch, tmp_path):
    """An ncu found on PATH only (no override, wheel or CUDA home) and a stand-in child whose status and stdout
    are ``state``'s."""
    binary = tmp_path / "ncu"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.delenv("WORKSHOP_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sass, "_wheel_bin_dirs", lambda: [])
    monkeypatch.setattr(sass, "CUDA_HOMES", ())
    state = {"stdout": "", "status": "ok", "runs": []}

    def run_child(handler, request, **options):
        state["runs"].append((handler, request, options))
        return ChildResult(state["status"], answer={}, stdout=state["stdout"], message="m")
    monkeypatch.setattr(counters, "run_child", run_child)
    return binary, state


def test_ncu_is_found_on_path_and_the_child_runs_under_it_with_its_limit(ncu_child):
    binary, state = ncu_child
    state["stdout"] = "\n".join([HEADER, row("k_v2(float*)", LD, "5"), row("k(float*, int)", LD, "3"),
                                 row("k(float*, int)", ST, "4")])
    assert counters.count({"r": 1}, "k", "shared_bank_conflicts", {"PYTHONPATH": "p"}) == 7
    (handler, request, options), = state["runs"]
    assert (handler, request) == (counters.CHILD, {"r": 1})
    assert options == {"timeout_s": counters.TIMEOUT_S, "gpu": True, "env": {"PYTHONPATH": "p"},
                       "wrapper": (str(binary), "--clock-control", "none", "--metrics", f"{LD},{ST}", "--csv",
                                   "-k", "regex:^k$")}


def test_without_ncu_grading_stops_with_how_to_get_it(ncu_child, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(counters.ProfilerMissing) as raised:
        counters.count({}, "k", "shared_bank_conflicts", {})
    assert str(raised.value) == ("Nsight Compute (ncu) was not found on this GPU worker: install it or set "
                                 "WORKSHOP_NCU")


@pytest.mark.parametrize("status, rows", [("ok", [row("k_v2", LD, "1"), row("k_v2", ST, "1")]),
                                          ("ok", [row("k", LD, "1")]),
                                          ("crashed", [row("k", LD, "1"), row("k", ST, "1")])])
def test_no_full_count_for_the_kernel_is_the_graders_failure_quoting_the_output(ncu_child, status, rows):
    _, state = ncu_child
    state["status"], state["stdout"] = status, "\n".join([HEADER, *rows, "z" * 600])
    with pytest.raises(counters.ProfilingFailed) as raised:
        counters.count({}, "k", "shared_bank_conflicts", {})
    assert str(raised.value) == f"ncu gave no shared_bank_conflicts for k ({status}: m) {state['stdout'][-500:]}"


def test_the_reference_is_profiled_on_fixed_inputs_with_the_students_shape_and_memory_cap(monkeypatch):
    spec = load_spec("transpose")
    calls = []
    monkeypatch.setattr(counters, "count", lambda *args: calls.append(args) or 10)
    request = {"spec_path": "s.toml", "kernel_id": "padded", "source": "src", "seed": 5, "memory_fraction": 0.5}
    counters.measure(spec, spec.kernel("padded"), request, {"E": "1"})
    tiled = spec.kernel("tiled")
    shape = list(spec.kernel("padded").perf_shape)
    assert calls == [
        (request | {"shape": shape}, "transpose_padded", "shared_bank_conflicts", {"E": "1"}, counters.TIMEOUT_S),
        ({"spec_path": "s.toml", "kernel_id": "tiled", "shape": shape, "source": tiled.reference.read_text(),
          "seed": counters.REFERENCE_SEED, "memory_fraction": 0.5}, "transpose_tiled", "shared_bank_conflicts",
         {"E": "1"}, counters.TIMEOUT_S)]
    counters.measure(spec, spec.kernel("padded"), {"spec_path": "t.toml", "seed": 5}, {})   # not s.toml's kept count
    assert calls[-1][0]["memory_fraction"] == 0.25
