"""GPU records: the GEMM benchmark's verdict on the warp-tiling goal (a benchmark's, not a test's), and the hash of
the grading code each record is made with."""
from __future__ import annotations

from workshop.records import WARPTILING_GOAL, warptiling_goal_line


def test_goal_verdict_at_and_around_the_goal():
    line = warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": WARPTILING_GOAL}})
    assert line.endswith(": met") and "93.7% of cuBLAS" in line
    below = warptiling_goal_line("4096x4096x4096", {"warptiling": {"ratio": WARPTILING_GOAL - 0.001}})
    assert below.endswith(": not met")
    assert warptiling_goal_line("4096x4096x4096", {"naive": {"ratio": 0.1}}) is None


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
