"""GPU records: the GEMM benchmark's verdict on the warp-tiling goal (a benchmark's, not a test's), and the hash of
the grading code each record is made with."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from graders import tracks
from graders.cuda_engine.spec import load_spec
from graders.settings import RESULTS, ROOT
from workshop import records, targets
from workshop.records import (WORKLOGS, grading_code, measured_files, measurement_code, new_gemm_record,
                              warptiling_goal_line)


@pytest.mark.parametrize("track, goal", [("gemm", "93.7%"), ("tensorcores", "50.0%")])
def test_goal_verdict_at_and_around_each_worklogs_goal(track, goal):
    at = WORKLOGS[track]["goal"]
    line = warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": at}}, track)
    assert line == f"  warp tiling at 4096x4096x4096: {goal} of cuBLAS; the worklog's goal {goal}: met"
    below = warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": at - 0.001}}, track)
    assert below.endswith(": not met")
    assert warptiling_goal_line("4096x4096x4096", {"naive": {"ratio": 0.1}}, track) is None
    assert warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": 0.937}}).endswith(": met")   # gemm's


def test_a_worklog_record_names_its_track_and_that_tracks_measuring_code():
    for track in WORKLOGS:
        record = new_gemm_record(None, track)
        assert record["track"] == track and record["measurement_code"] == measurement_code(track)
        assert record["targets_in_spec"] == load_spec(track).targets and record["sizes"] == {}


def test_grading_code_hash_follows_the_grading_files(tmp_path):
    from workshop.records import grading_code
    (tmp_path / "graders").mkdir()
    (tmp_path / "tracks" / "t" / "solutions").mkdir(parents=True)
    (tmp_path / "graders" / "rule.py").write_text("LIMIT = 1\n")
    (tmp_path / "tracks" / "t" / "spec.toml").write_text("[assignment]\n")
    before = grading_code(tmp_path)
    (tmp_path / "tracks" / "t" / "solutions" / "ref.cu").write_text("// a solution is not grading code")
    (tmp_path / "tracks" / "t" / "notebook.py").write_text("# nor is the notebook builder")
    assert grading_code(tmp_path) == before
    (tmp_path / "graders" / "rule.py").write_text("LIMIT = 2\n")
    assert grading_code(tmp_path) != before
    (tmp_path / "graders" / "rule.py").write_text("LIMIT = 1\n")
    (tmp_path / "tracks" / "t" / "spec.toml").write_text("[assignment]\ntargets = 'measured'\n")
    assert grading_code(tmp_path) != before


RECORD_NAME = re.compile(r"benchmarks/results/([\w-]+/[\w.-]+-\d{8}-\d{6}\.json)")   # a dated record a text cites


def test_measured_targets_rest_on_records_of_the_current_measuring_code():
    """A spec whose targets are "measured" names its records (``measured_in``); each must exist and carry the
    `measurement_code` of the code as it is now. Otherwise the targets are older than the code they describe:
    re-measure on a GPU worker (benchmarks/regrade_spread.py, then `workshop targets --write`), or say
    targets = "provisional"."""
    for track in tracks.all_tracks():
        if track.engine not in targets.SPEC_READERS:
            continue
        spec = targets.load_timed_spec(track.spec_path)
        for name in spec.measured_in:
            record = json.loads((ROOT / name).read_text())
            assert record.get("track") == track.name, f"{spec.path}: {name} is not a record of {track.name}"
            assert record.get("measurement_code") == measurement_code(track.name), (
                f"{spec.path}: its targets come from {name}, made with measuring code "
                f"{record.get('measurement_code')}, but the code is now {measurement_code(track.name)}")


# The specs whose targets still wait for their measurement on the grading GPU (issue 29). Only ever remove a track
# from this set, when `workshop targets --write` has measured it; once it is empty, every timed spec is measured.
AWAITING_MEASUREMENT = {"gemm", "nvfp4"}


def test_no_spec_is_provisional_but_those_awaiting_their_measurement():
    """A new track's spec, or a measured one set back to provisional, does not say so unnoticed."""
    provisional = {track.name for track in tracks.all_tracks() if track.engine in targets.SPEC_READERS
                   and targets.load_timed_spec(track.spec_path).targets == "provisional"}
    assert provisional == AWAITING_MEASUREMENT, (
        f"provisional, not awaiting: {sorted(provisional - AWAITING_MEASUREMENT)}; measured, still listed: "
        f"{sorted(AWAITING_MEASUREMENT - provisional)}")


def test_records_the_readmes_point_at_describe_the_current_code():
    for readme in [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")), *sorted(ROOT.glob("tracks/*/README.md"))]:
        for name in RECORD_NAME.findall(readme.read_text()):
            record = json.loads((RESULTS / name).read_text())
            if "track" in record:
                assert record["measurement_code"] == measurement_code(record["track"]), f"{readme}: {name} is stale"
            else:
                assert record.get("grading_code") == grading_code(), f"{readme}: {name} is older than the code"


def test_the_measurement_code_follows_what_a_measurement_depends_on(tmp_path):
    """The grading child's modules, the references and the spec's data count; targets, floors, comments, the
    known-wrong solutions and modules the child does not import do not."""
    root = tmp_path
    shutil.copytree(ROOT / "graders", root / "graders", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tracks" / "vecadd", root / "tracks" / "vecadd")
    before = measurement_code("vecadd", root)
    spec = root / "tracks/vecadd/spec.toml"
    text = spec.read_text()
    spec.write_text("# a new comment\n" + text.replace("target = 0.76", "target = 0.5").replace(
        'targets = "measured"', 'targets = "provisional"'))
    (root / "tracks/vecadd/solutions/wrong/new_mistake.cu").write_text("// not measured\n")
    (root / "graders/numba_engine/child.py").write_text("# not imported by the CUDA child\n")
    assert measurement_code("vecadd", root) == before
    for changed in [lambda: spec.write_text(text.replace("perf_shape = [67108864]", "perf_shape = [1048576]")),
                    lambda: (root / "tracks/vecadd/solutions/add.cu").write_text("// another reference\n"),
                    lambda: (root / "graders/cuda_engine/timing.py").write_text("# another timer\n")]:
        changed()
        assert measurement_code("vecadd", root) != before
        before = measurement_code("vecadd", root)


def test_a_kind_another_track_defines_counts_in_the_measurement_code(tmp_path):
    """A Triton softmax is graded on the attention track's row_softmax: that track's problem.py (its inputs, its
    check) is part of what the Triton track's targets were measured with, and a GEMM track's kinds are its own."""
    root = tmp_path
    shutil.copytree(ROOT / "graders", root / "graders", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("triton", "attention", "vecadd"):
        shutil.copytree(ROOT / "tracks" / name, root / "tracks" / name)
    before = measurement_code("triton", root)
    problem = root / "tracks/attention/problem.py"
    problem.write_text(problem.read_text() + "\n# the row softmax's inputs, changed\n")
    assert measurement_code("triton", root) != before
    assert not any("attention" in str(path) for path in measured_files("tensorcores"))


# benchmarks/results/<track>/, and platform/ for what is not one track's
FOLDERS = {*(track.name for track in tracks.all_tracks()), "platform"}
CITING = ["README.md", "docs/**/*.md", "tracks/*/README.md", "tracks/*/spec.toml", "docker/README.md",
          "benchmarks/results/**/*.md", "pyproject.toml"]
CITED = re.compile(r"benchmarks/results/[\w.*<>/-]*")                      # a path under the results a text cites
WRITE_UP_CITES = re.compile(r"`((?:\.\./[\w-]+/)?[\w.*-]+\.(?:json|log|md|txt|png))`")   # a write-up's, beside it
TEMPLATE = re.compile(r"<|(?<![a-z])[A-Z]+(?![a-z])")                          # gemm-<date>.json, gemm-A.json


def test_every_result_is_in_its_tracks_folder_or_the_platforms():
    loose = [p.name for p in RESULTS.iterdir() if p.is_file() and p.name != "README.md"]
    assert loose == [], "benchmarks/results/ holds only README.md and one folder per track, and platform/"
    misplaced = [p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("*")
                 if p.parent != RESULTS and (p.is_dir() or p.parent.parent != RESULTS or p.parent.name not in FOLDERS)]
    assert misplaced == [], f"each result is in benchmarks/results/<folder>/, one of {sorted(FOLDERS)}"
    index = (RESULTS / "README.md").read_text()
    assert all(f"`{folder}/`" in index for folder in FOLDERS), "benchmarks/results/README.md has a line per folder"


def test_a_record_goes_to_its_tracks_folder_or_the_platforms(tmp_path, monkeypatch):
    """A track's record (a measurement of its code, or a run of it) in its folder, the rest in platform/; a copy
    in $OUT, unless $OUT is that folder."""
    monkeypatch.setattr(records, "RESULTS", tmp_path)
    monkeypatch.setenv("OUT", str(tmp_path / "gemm"))
    probe = records.write_gpu_record("counter-probe-gemm", "a measurement", {}, track="gemm")
    run = records.write_gpu_record("gemm-track-nbgrader-gpu", "a run", {}, folder="gemm")
    (tmp_path / "out").mkdir()
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    attack = records.write_gpu_record("sandbox-include-attack-gpu", "not one track's", {})
    assert (probe.parent, run.parent, attack.parent) == (tmp_path / "gemm", tmp_path / "gemm", tmp_path / "platform")
    assert json.loads(probe.read_text())["measurement_code"] == measurement_code("gemm")
    assert "track" not in json.loads(run.read_text())
    assert [p.name for p in (tmp_path / "out").iterdir()] == [attack.name]


def found(folder: Path, cited: str) -> bool:
    return bool(list(folder.glob(cited))) if "*" in cited else (folder / cited).exists()


def test_every_result_a_text_cites_exists():
    """Specs (``measured_in`` and comments), the READMEs, docs/ and the write-ups beside the records cite paths
    under benchmarks/results/ (a ``*`` must match a file; templates such as ``<date>`` are not paths); a write-up
    also cites files by name, beside it or in ``../<folder>/``."""
    missing = []
    for text in sorted({p for pattern in CITING for p in ROOT.glob(pattern)}):
        for cited in CITED.findall(text.read_text()):
            cited = cited.rstrip(".")
            if not TEMPLATE.search(cited) and not found(ROOT, cited):
                missing.append(f"{text.relative_to(ROOT)}: {cited}")
        if text.parent.parent == RESULTS:   # a write-up beside records
            missing += [f"{text.relative_to(ROOT)}: {name}" for name in WRITE_UP_CITES.findall(text.read_text())
                        if not name.startswith("-") and not found(text.parent, name)]
    assert missing == [], missing
