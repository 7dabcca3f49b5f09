"""The profiler as a grader, on a machine without a GPU: counter rules in specs, ncu's CSV read, the child
profiled under ncu, the reference's count kept per process, and what a count short of the rule's bound does to a
kernel's result and its report (the scale itself: test_scoring.py); the counts a timed test's preparation makes
standing in for the test's own. (Real ncu runs: tests/gpu.)"""
from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from graders import tracks
from graders.cuda_engine import counters, grade, timing
from graders.cuda_engine.scoring import score_kernel
from graders.cuda_engine.spec import CounterRule, SpecError, load_spec
from graders.gpu import GpuInfo, NeedsGPUWorker
from graders.hidden_tests import preparation
from graders.result import GradeResult, Status
from graders.sandbox.run import ChildResult

LD, ST = counters.METRICS["shared_bank_conflicts"][0]
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def ncu_csv(function: str, ld: int, st: int) -> str:
    rows = [f'"0","7","python3","127.0.0.1","{function}","1","13","(32, 8, 1)","(256, 256, 1)","0","9.0",'
            f'"Command line profiler metrics","{name}","","{value:,}"' for name, value in ((LD, ld), (ST, st))]
    return "==PROF== Connected to process 7\n" + "\n".join([HEADER, *rows]) + "\n==PROF== Disconnected\n"


def test_every_counter_rule_in_the_tracks_names_a_known_metric_and_a_reference():
    rules = {(t.name, k.id): k.counter for t in tracks.all_tracks() if t.engine == "cuda"
             for k in load_spec(t.folder).kernels.values() if k.counter}
    assert set(rules) == {("transpose", "padded"), ("gemm", "linearize"), ("gemm", "swizzle"),
                          ("tensorcores", "swizzle"), ("attention", "flash_causal"), ("attention", "flash_tc_causal")}
    for (track, _), rule in rules.items():
        assert rule.metric in counters.METRICS and load_spec(track).kernel(rule.relative_to).reference.is_file()


def test_ncu_csv_is_read_per_kernel_and_metric():
    text = ncu_csv("transpose_padded", 20_123, 0) + "a line of the child's own\n"
    assert counters.parse_csv(text, (LD, ST)) == {"transpose_padded": {LD: 20123, ST: 0}}


def test_a_count_the_kernel_printed_itself_is_not_taken_for_ncus():
    """Device printf reaches the same output as ncu's report: a forged row for the kernel fails the grading."""
    forged = ncu_csv("transpose_padded", 0, 0).split("\n", 1)[1]   # header and rows, as a printf could write
    with pytest.raises(counters.ProfilingFailed, match="twice"):
        counters.parse_csv(forged + ncu_csv("transpose_padded", 16_400_000, 0), (LD, ST))


@pytest.fixture
def ncu(monkeypatch, tmp_path):
    """A stand-in ncu binary on an H200 and a child runner that answers with ``counts[function]`` as ncu's CSV, or
    as a crashed child while ``counts[function]`` is None."""
    binary = tmp_path / "ncu"
    binary.write_text("")
    monkeypatch.setenv("WORKSHOP_NCU", str(binary))
    monkeypatch.setattr(counters, "detect_gpu", lambda: GpuInfo("NVIDIA H200", 1, (9, 0)))
    runs, counts = [], {}

    def child(handler, request, **options):
        function = options["wrapper"][-1].removeprefix("regex:^").removesuffix("$")
        runs.append({"handler": handler, "request": request, **options})
        if counts[function] is None:
            return ChildResult("crashed", message="the GPU fell off the bus")
        return ChildResult("ok", answer={"launched": request["shape"]}, stdout=ncu_csv(function, *counts[function]))
    monkeypatch.setattr(counters, "run_child", child)
    return binary, runs, counts


def test_the_kernel_and_its_naive_reference_are_each_profiled_once_at_the_perf_shape(ncu):
    binary, runs, counts = ncu
    counts |= {"transpose_padded": (20_000, 0), "transpose_tiled": (16_400_000, 0)}
    spec = load_spec("transpose")
    request = {"spec_path": str(spec.path), "kernel_id": "padded", "source": "src", "seed": 3}
    measured = counters.measure(spec, spec.kernel("padded"), request, {"PYTHONPATH": "x"})
    seconds = measured.pop("seconds")
    assert set(seconds) == {"yours", "reference"} and all(0 <= s < 5 for s in seconds.values())
    assert measured == {"metric": "shared_bank_conflicts", "ncu_metrics": [LD, ST], "shape": [8192, 8192],
                        "yours": 20_000, "reference": 16_400_000, "reference_cached": False, "relative_to": "tiled",
                        "at_most": 0.05, "share": 1.0, "failure": ""}
    assert [r["request"]["kernel_id"] for r in runs] == ["padded", "tiled"]
    assert runs[0]["request"]["source"] == "src" and runs[1]["request"]["source"] == \
        spec.kernel("tiled").reference.read_text()
    assert runs[0]["request"]["seed"] == 3 and runs[1]["request"]["seed"] == counters.REFERENCE_SEED
    assert all(r["handler"] == counters.CHILD and r["gpu"] and r["request"]["shape"] == [8192, 8192] for r in runs)
    assert runs[0]["wrapper"] == (str(binary), "--clock-control", "none", "--metrics", f"{LD},{ST}", "--csv", "-k",
                                  "regex:^transpose_padded$")


@pytest.mark.parametrize("yours, share", [(820_000, 1.0), (820_001, 0.99)])   # 0.05 x 16.4 M = 820,000
def test_all_the_speed_points_exactly_at_the_bound(ncu, yours, share):
    _, _, counts = ncu
    counts |= {"transpose_padded": (yours, 0), "transpose_tiled": (16_400_000, 0)}
    spec = load_spec("transpose")
    measured = counters.measure(spec, spec.kernel("padded"), {"spec_path": "", "seed": 1}, {})
    assert measured["share"] == share
    assert measured["failure"] == ("" if share == 1 else
        "its shared-memory bank conflicts (ncu, one launch at 8192 x 8192): 820,001, against 16,400,000 for the "
        "reference of step tiled; all the speed points need at most 0.05 x that (820,000), 20x fewer; its count is "
        "20x fewer than the reference's, so they are multiplied by 0.99 (log 20.00 / log 20, in whole hundredths)")


# ---- the reference's count, kept per process ------------------------------------------------------------

def measure_padded(request: dict | None = None) -> dict:
    spec = load_spec("transpose")
    request = request or {"spec_path": str(spec.path), "kernel_id": "padded", "seed": 1}
    return counters.measure(spec, spec.kernel("padded"), request, {})


def test_a_second_grading_profiles_only_the_students_kernel(ncu):
    _, runs, counts = ncu
    counts |= {"transpose_padded": (20_000, 0), "transpose_tiled": (16_400_000, 0)}
    first = measure_padded()
    counts["transpose_padded"] = (30_000, 0)
    second = measure_padded({"spec_path": str(load_spec("transpose").path), "kernel_id": "padded", "seed": 2})
    assert [r["request"]["kernel_id"] for r in runs] == ["padded", "tiled", "padded"]
    assert (first["reference_cached"], second["reference_cached"]) == (False, True)
    assert (second["yours"], second["reference"]) == (30_000, 16_400_000)


def test_a_failed_count_of_the_reference_is_not_kept(ncu):
    _, runs, counts = ncu
    counts |= {"transpose_padded": (20_000, 0), "transpose_tiled": None}
    with pytest.raises(counters.ProfilingFailed, match="ncu gave no shared_bank_conflicts for transpose_tiled"):
        measure_padded()
    counts["transpose_tiled"] = (16_400_000, 0)
    assert measure_padded()["reference"] == 16_400_000
    assert [r["request"]["kernel_id"] for r in runs] == ["padded", "tiled", "padded", "tiled"]


def test_a_new_process_on_the_same_worker_takes_the_references_count_from_its_disk(ncu, monkeypatch):
    """Each submission is graded by an nbgrader process of its own: the count is kept in the worker's cache folder
    too, and read back only under the very key it was stored with (a compiler or library of another version, a
    are profiled again)."""
    _, runs, counts = ncu
    counts |= {"transpose_padded": (20_000, 0), "transpose_tiled": (16_400_000, 0)}
    assert measure_padded()["reference_cached"] is False
    (kept,) = counters.counts_cache().iterdir()
    monkeypatch.setattr(counters, "_reference_counts", {})   # another process
    again = measure_padded()
    assert (again["reference"], again["reference_cached"]) == (16_400_000, True)
    assert [r["request"]["kernel_id"] for r in runs] == ["padded", "tiled", "padded"]
    monkeypatch.setattr(counters, "_reference_counts", {})
    monkeypatch.setattr(timing, "versions", lambda: {"nvrtc": "99.0"})
    assert measure_padded()["reference_cached"] is False
    assert len(list(kept.parent.iterdir())) == 2


def test_a_count_file_of_another_key_or_not_a_count_is_not_taken(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_COUNTS_CACHE", str(tmp_path / "counts"))
    counters._store_count("the key", 42)
    assert counters._stored_count("the key") == 42
    counters._count_file("the key").write_text('{"key": "another key", "count": 42}')
    assert counters._stored_count("the key") is None
    for text in ("not json", '{"key": "the key", "count": "42"}', '["the key", 42]'):
        counters._count_file("the key").write_text(text)
        assert counters._stored_count("the key") is None


def test_a_worker_that_cannot_write_its_cache_counts_again(tmp_path, monkeypatch):
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv("WORKSHOP_COUNTS_CACHE", str(tmp_path / "a file" / "counts"))
    counters._store_count("the key", 42)
    assert counters._stored_count("the key") is None


@pytest.mark.parametrize("change", ["device", "reference source", "measuring code", "spec"])
def test_the_reference_is_profiled_again_when_what_decides_its_count_changes(ncu, monkeypatch, tmp_path, change):
    _, runs, counts = ncu
    counts |= {"transpose_padded": (20_000, 0), "transpose_tiled": (16_400_000, 0)}
    spec = load_spec("transpose")
    measure_padded()
    if change == "device":   # another GPU ("gpu" would mark the test a GPU test)
        monkeypatch.setattr(counters, "detect_gpu", lambda: GpuInfo("NVIDIA H100 80GB HBM3", 1, (9, 0)))
    elif change == "reference source":
        edited = tmp_path / "tiled.cu"
        edited.write_text(spec.kernel("tiled").reference.read_text() + "// edited\n")
        tiled = dataclasses.replace(spec.kernel("tiled"), reference=edited)
        spec = dataclasses.replace(spec, kernels=spec.kernels | {"tiled": tiled})
    elif change == "measuring code":
        monkeypatch.setattr(counters, "measuring_code", lambda: "another grader")
    spec_path = str(spec.path) + (" (another)" if change == "spec" else "")
    measured = counters.measure(spec, spec.kernel("padded"), {"spec_path": spec_path, "kernel_id": "padded",
                                                              "seed": 1}, {})
    assert measured["reference_cached"] is False
    assert [r["request"]["kernel_id"] for r in runs] == ["padded", "tiled", "padded", "tiled"]


def test_a_worker_without_ncu_stops_grading(monkeypatch):
    monkeypatch.setenv("WORKSHOP_NCU", "/nonexistent/ncu")
    with pytest.raises(NeedsGPUWorker, match="Nsight Compute"):
        counters.count({}, "transpose_padded", "shared_bank_conflicts", {})


def test_no_count_from_ncu_is_the_graders_failure(ncu, monkeypatch):
    monkeypatch.setattr(counters, "run_child", lambda *a, **k: ChildResult("ok", answer={}, stdout="==PROF== ..."))
    with pytest.raises(counters.ProfilingFailed, match="ncu gave no shared_bank_conflicts for transpose_padded"):
        counters.count({}, "transpose_padded", "shared_bank_conflicts", {})


def timed(ratio: float, floor: float, target: float) -> dict:
    """A correct kernel's details at speed ratio ``ratio``, as the grading child answers."""
    return {"score": {}, "curve": {"floor": floor, "target": target},
            "timing": {"ratio": ratio, "work_unit": "B", "kernel": {"median_s": 1e-3, "throughput": 1e12 * ratio},
                       "baseline": {"name": "the copy", "median_s": 1e-3 * ratio, "throughput": 1e12}}}


def ok_padded() -> GradeResult:
    """A correct padded kernel halfway between its floor and its target: half of its 2 speed points."""
    padded = load_spec("transpose").kernel("padded")
    ratio = (padded.floor + padded.target) / 2
    score = score_kernel(padded, True, ratio)
    return GradeResult("padded", Status.OK, points=score.total, max_points=3.0, target="gpu",
                       details=timed(ratio, padded.floor, padded.target) | {"score": score.as_dict()})


def measured(yours: int, share: float, failure: str = "its shared-memory bank conflicts ...") -> dict:
    return {"metric": "shared_bank_conflicts", "shape": [8192, 8192], "yours": yours, "reference": 16_400_000,
            "relative_to": "tiled", "at_most": 0.05, "share": share, "failure": failure}


def test_a_count_no_fewer_than_the_references_keeps_the_correctness_points_only(monkeypatch):
    spec = load_spec("transpose")
    monkeypatch.setattr(counters, "measure", lambda *a: measured(16_400_000, 0.0))
    result = grade.counted(ok_padded(), spec, spec.kernel("padded"), {}, spec.kernel("padded").geometry)
    assert result.status == Status.UNMET and result.points == 1.0
    assert result.message == "correct, but its shared-memory bank conflicts ..."
    assert result.details["score"] == {"correctness": 1.0, "performance": 0.0, "max": 3.0, "total": 1.0}
    text = grade.report(dataclasses.replace(result, details=result.details | {"compile": {}}))
    assert ("  on a log scale from as many as the reference's (speed points x 0) to 20x fewer (x 1), yours is "
            "equal to the reference's: speed points x 0") in text.splitlines()


def test_a_count_between_the_reference_and_the_bound_earns_its_share_of_the_speed_points(monkeypatch):
    """The linearize step handed in on the H200: 7.69x fewer conflicts than the previous step's reference, where
    the rule asks 20x; its speed points are multiplied by 0.68, and it stays unmet."""
    spec = load_spec("gemm")
    kernel = spec.kernel("linearize")   # 1 + 2 points, floor 0.33, target 0.698
    theirs = 289_000_000
    monkeypatch.setattr(counters, "count", lambda request, function, *a: 37_600_000 if function == kernel.function
                        else theirs)
    ratio = (kernel.floor + kernel.target) / 2
    ok = GradeResult("linearize", Status.OK, points=2.0, max_points=3.0, target="gpu", seed=5,
                     details=timed(ratio, kernel.floor, kernel.target))
    result = grade.counted(ok, spec, kernel, {"spec_path": str(spec.path), "seed": 5}, kernel.geometry)
    assert result.status == Status.UNMET and result.points == pytest.approx(1 + 2 * 0.5 * 0.68)
    assert result.details["score"]["performance"] == pytest.approx(0.68)
    assert result.message == (
        "correct, but its shared-memory bank conflicts (ncu, one launch at 4096 x 4096 x 4096): 37,600,000, against "
        "289,000,000 for the reference of step vectorized; all the speed points need at most 0.05 x that "
        "(14,450,000), 20x fewer; its count is 7.69x fewer than the reference's, so they are multiplied by 0.68 "
        "(log 7.69 / log 20, in whole hundredths)")
    assert grade.report(result).splitlines() == [
        f"linearize: unmet (hidden, seed 5): {result.message}",
        "  your kernel 1.0000 ms (514 GB/s); the copy 0.5140 ms (1000 GB/s); ratio 0.514 (full marks at 0.698, none "
        "below 0.33)",
        "  shared-memory bank conflicts (ncu, one launch at 4096 x 4096 x 4096): yours 37,600,000; the reference of "
        "vectorized 289,000,000; the bound 0.05 x that, 14,450,000",
        "  on a log scale from as many as the reference's (speed points x 0) to 20x fewer (x 1), yours is 7.69x fewer "
        "than the reference's: speed points x 0.68 (log 7.69 / log 20, in whole hundredths)",
        "  points: 1.68 / 3 (correctness 1, speed 0.68)"]


def test_a_count_within_the_rule_changes_nothing_but_the_record(monkeypatch):
    spec = load_spec("transpose")
    monkeypatch.setattr(counters, "measure", lambda *a: measured(20_000, 1.0, failure=""))
    result = grade.counted(ok_padded(), spec, spec.kernel("padded"), {}, spec.kernel("padded").geometry)
    assert result.ok and result.points == pytest.approx(2.0) and result.details["counter"]["failure"] == ""
    assert "yours is 820x fewer than the reference's: speed points x 1" in grade.report(result)


def test_a_profiler_that_fails_is_a_grader_error(monkeypatch):
    spec = load_spec("transpose")

    def broken(*args):
        raise counters.ProfilingFailed("ncu gave no shared_bank_conflicts")
    monkeypatch.setattr(counters, "measure", broken)
    result = grade.counted(ok_padded(), spec, spec.kernel("padded"), {}, spec.kernel("padded").geometry)
    assert result.status == Status.GRADER_ERROR and result.points == 0


# --- the counts prepared before the submission's first kernel is timed ----------------------------------------

def prepare_padded(monkeypatch, found: str = "", counted=None) -> tuple[dict | None, list]:
    """`grade.prepare` of the padded transpose (a counter rule) with the sanitizer finding ``found``; ``counted``
    is what `counters.measure` returns or raises."""
    calls = []
    monkeypatch.setattr(grade.sanitizer, "sanitize", lambda *args, timeout_s: {
        "shape": [33, 65], "tools": {"memcheck": found}, "failure": found, "seconds": {"memcheck": 1.0}})

    def measure(spec, kernel, request, env, timeout_s):
        calls.append((kernel.id, request["source"], timeout_s))
        if isinstance(counted, Exception):
            raise counted
        return counted
    monkeypatch.setattr(counters, "measure", measure)
    return grade.prepare("transpose", "padded", "the source"), calls


def test_the_preparation_counts_a_kernel_with_a_counter_rule_after_its_sanitizer_runs(monkeypatch):
    value, calls = prepare_padded(monkeypatch, counted=measured(20_000, 1.0, failure=""))
    assert calls == [("padded", "the source", grade.PREPARE_TIMEOUT_S)]
    assert value["counter"] == measured(20_000, 1.0, failure="") and not value["checked"]["failure"]
    assert grade.prepare("transpose", "padded", "the source", profile=False)["counter"] is None and len(calls) == 1


def test_a_kernel_the_sanitizer_failed_is_not_counted_and_a_failed_count_keeps_the_findings(monkeypatch):
    value, calls = prepare_padded(monkeypatch, found="race", counted=measured(1, 1.0))
    assert calls == [] and value["counter"] is None and value["checked"]["failure"] == "race"
    value, _ = prepare_padded(monkeypatch, counted=counters.ProfilingFailed("ncu gave nothing"))
    assert value["counter"] is None and value["counter_error"] == "ProfilingFailed: ncu gave nothing"
    assert value["checked"]["tools"] == {"memcheck": ""}


@pytest.mark.parametrize("same", [True, False], ids=["same launch", "another source"])
def test_the_counts_prepared_for_the_same_launch_stand_in_for_ncus_run(monkeypatch, same):
    spec = load_spec("transpose")
    kernel = spec.kernel("padded")
    inline = []
    monkeypatch.setattr(counters, "measure", lambda *a: inline.append(a) or measured(30_000, 1.0, failure=""))
    request = {"spec_path": str(spec.path.resolve()), "kernel_id": "padded", "source": "s"}
    launch = (request["spec_path"], "padded", "s" if same else "another", kernel.geometry)
    with preparation({"launch": launch, "checked": None, "counter": measured(20_000, 1.0, failure="")}):
        result = grade.counted(ok_padded(), spec, kernel, request, kernel.geometry)
    assert result.details["counter"]["yours"] == (20_000 if same else 30_000)
    assert result.details["counter"].get("prepared", False) == same and len(inline) == (0 if same else 1)


def test_one_ncu_runs_at_a_time_in_a_process(monkeypatch):
    """Preparations run side by side; each ncu child waits for the one before it."""
    running, most = [0], [0]

    def run_child(*args, **kwargs):
        running[0] += 1
        most[0] = max(most[0], running[0])
        time.sleep(0.05)
        running[0] -= 1
        return ChildResult("ok", stdout=ncu_csv("k", 1, 2))
    monkeypatch.setattr(counters, "ncu_binary", lambda: "/usr/bin/ncu")
    monkeypatch.setattr(counters, "run_child", run_child)
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda _: counters.count({}, "k", "shared_bank_conflicts", {}), range(4)))
    assert counts == [3] * 4 and most[0] == 1

def spec_text(counter: str) -> str:
    return f'''[assignment]
name = "t"
engine = "cuda"
check_shapes = [[4, 4]]
perf_shape = [64, 64]
block = [4, 4]
tile = [4, 4]
points_correct = 1
points_perf = 2
floor = 0.1
target = 0.5

[[kernel]]
id = "naive"
function = "naive"
kind = "transpose"
reference = "naive.cu"

[[kernel]]
id = "padded"
function = "padded"
kind = "transpose"
{counter}
'''


@pytest.mark.parametrize("counter, message", [
    ('counter = { metric = "m", relative_to = "naive", at_most = 0.05 }', None),
    ('counter = { metric = "m", relative_to = "naive", at_most = 0 }', "'at_most' must be a positive number"),
    ('counter = { metric = "m", relative_to = "naive", at_most = 0.05, points = 1 }', "unknown key(s) ['points']"),
    ('counter = { metric = "m", relative_to = "nobody", at_most = 0.05 }', "counter.relative_to must name"),
    ('counter = { metric = "m", relative_to = "padded", at_most = 0.05 }', "counter.relative_to must name"),
    ('counter = "shared_bank_conflicts"', "must be a table"),
])
def test_a_counter_rule_is_checked_when_the_spec_is_read(tmp_path, counter, message):
    (tmp_path / "naive.cu").write_text("")
    (tmp_path / "spec.toml").write_text(spec_text(counter))
    if message is None:
        assert load_spec(tmp_path / "spec.toml").kernel("padded").counter == CounterRule("m", "naive", 0.05)
    else:
        with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                           .replace("]", r"\]")):
            load_spec(tmp_path / "spec.toml")


def test_the_toolkits_launcher_script_leads_to_nsight_computes_own_ncu(monkeypatch, tmp_path):
    """The toolkit's bin/ncu is a script that runs Nsight Compute's ncu beside the toolkit or under /opt/nvidia: the
    program is what a child runs under (a sandbox shows the folder of what it runs, not where a script looks)."""
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    launcher = toolkit / "bin" / "ncu"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    monkeypatch.setattr(counters, "find_tool", lambda name: launcher)
    monkeypatch.setattr(counters, "NSIGHT_COMPUTE_HOME", str(tmp_path / "opt-nvidia"))
    assert counters.ncu_binary() == launcher             # nothing installed beside it yet
    for program in (tmp_path / "opt-nvidia" / "2025.3.1" / "ncu", toolkit / "nsight-compute-2026.1" / "ncu"):
        program.parent.mkdir(parents=True)
        program.write_bytes(b"\x7fELF")
        program.chmod(0o755)
    assert counters.ncu_binary() == toolkit / "nsight-compute-2026.1" / "ncu"   # the toolkit's own first
    (toolkit / "nsight-compute-2026.1" / "ncu").unlink()
    assert counters.ncu_binary() == tmp_path / "opt-nvidia" / "2025.3.1" / "ncu"
    monkeypatch.setattr(counters, "find_tool", lambda name: tmp_path / "opt-nvidia" / "2025.3.1" / "ncu")
    assert counters.ncu_binary() == tmp_path / "opt-nvidia" / "2025.3.1" / "ncu"   # a program is itself
