"""``workshop targets``: the specs' targets follow from the committed benchmark records, as their comments say."""
from __future__ import annotations

import re
import shutil

import pytest

from graders.cuda_engine.spec import load_spec
from graders.settings import RESULTS, TRACKS
from workshop import targets
from workshop.cli import main

TRANSPOSE_RECORD = RESULTS / "transpose-20261202-132019.json"   # the run the transpose spec's comment names
GEMM_RECORD = RESULTS / "gemm-20261202-153234.json"


def printed_targets(out: str) -> dict[str, float]:
    return {kid: float(value) for kid, value in re.findall(r"^  (\w+) +ratio [\d.]+  target = ([\d.]+)", out, re.M)}


@pytest.mark.parametrize("track, record, fraction",
                         [("transpose", TRANSPOSE_RECORD, 0.95), ("gemm", GEMM_RECORD, 0.92)])
def test_printed_targets_are_the_specs(track, record, fraction, capsys):
    """About 95% (transpose) and 0.92 x (gemm) of each reference's measured ratio, as the specs' comments say."""
    spec = load_spec(track)
    assert main(["targets", track, str(record), "--fraction", str(fraction)]) == 0
    out = capsys.readouterr().out
    assert printed_targets(out) == {kid: k.target for kid, k in spec.kernels.items()}
    assert "nothing written" in out


def test_write_changes_only_the_target_lines(tmp_path, capsys):
    spec_file = tmp_path / "spec.toml"
    original = (TRACKS / "transpose" / "spec.toml").read_text()
    spec_file.write_text(original.replace('targets = "measured"', 'targets = "provisional"  # until measured'))
    assert targets.run(spec_file, [TRANSPOSE_RECORD], 0.9, write=True) == 0
    new = printed_targets(capsys.readouterr().out)
    spec = load_spec(spec_file)
    assert spec.targets == "measured"
    assert {kid: k.target for kid, k in spec.kernels.items()} == new
    assert new == {"copy": 0.87, "naive": 0.12, "tiled": 0.38, "padded": 0.76, "best": 0.84}
    changed = [(a, b) for a, b in zip(original.splitlines(), spec_file.read_text().splitlines()) if a != b]
    assert len(original.splitlines()) == len(spec_file.read_text().splitlines())
    assert changed == [('targets = "measured"', 'targets = "measured"  # until measured'),
                       ("target = 0.92", "target = 0.87"), ("target = 0.40", "target = 0.38"),
                       ("target = 0.80", "target = 0.76"), ("target = 0.89", "target = 0.84")]


def test_several_records_take_each_kernels_lowest_ratio():
    spec = load_spec("gemm")
    earlier = RESULTS / "gemm-20261202-144842.json"
    lowest = targets.lowest_ratios([GEMM_RECORD, earlier], spec)
    one = targets.lowest_ratios([GEMM_RECORD], spec)
    two = targets.lowest_ratios([earlier], spec)
    assert lowest == {kid: min(one[kid], two[kid]) for kid in spec.kernels}


def test_a_kernel_without_a_target_line_gets_one():
    text = '[assignment]\nname = "t"\ntarget = 0.5\n\n[[kernel]]\nid = "a"  # first\nfloor = 0.1\n'
    assert targets.rewrite_spec(text, {"a": 0.42}) == (
        '[assignment]\ntargets = "measured"\nname = "t"\ntarget = 0.5\n\n'
        '[[kernel]]\nid = "a"  # first\ntarget = 0.42\nfloor = 0.1\n')


def test_records_without_ratios_and_targets_under_a_floor_are_refused(tmp_path, capsys):
    assert main(["targets", "transpose", str(RESULTS / "transpose-nbgrader-gpu-20261203-104539.json")]) == 2
    assert "holds no measured ratio" in capsys.readouterr().err
    spec_file = tmp_path / "spec.toml"
    shutil.copy(TRACKS / "transpose" / "spec.toml", spec_file)
    with pytest.raises(targets.TargetsError, match="not above its floor"):
        targets.run(spec_file, [TRANSPOSE_RECORD], 0.3, write=True)
    assert spec_file.read_text() == (TRACKS / "transpose" / "spec.toml").read_text()
