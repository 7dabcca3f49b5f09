"""The GEMM worklogs' benchmark at other sizes (`benchmarks.gemm_bench.spec_for_size`): a copy of a track's spec
that differs only in its perf_shape, grading the same references."""
from __future__ import annotations

import sys

import pytest

from benchmarks.gemm_bench import spec_for_size
from graders.cuda_engine.spec import load_spec


@pytest.mark.parametrize("track", ["gemm", "tensorcores"])
def test_a_size_copy_of_the_spec_changes_only_the_perf_shape(track, tmp_path):
    original = load_spec(track)
    path = spec_for_size((8192, 8192, 8192), tmp_path, track=track)
    assert path.name == f"{track}-8192x8192x8192.toml"
    copy = load_spec(path)
    assert list(copy.kernels) == list(original.kernels)
    for kid, kernel in copy.kernels.items():
        assert kernel.perf_shape == (8192, 8192, 8192)
        assert kernel.reference.read_text() == original.kernel(kid).reference.read_text()
        assert (kernel.kind, kernel.function, kernel.target, kernel.floor, kernel.check_shapes) == (
            original.kernel(kid).kind, original.kernel(kid).function, original.kernel(kid).target,
            original.kernel(kid).floor, original.kernel(kid).check_shapes)


def test_grading_at_other_sizes_asks_for_the_sandbox_off(monkeypatch, capsys):
    """The size copies lie under /tmp, private in the grading child's sandbox: sandboxed, every kernel would be a
    grader error, so the benchmark stops first and says how to run it."""
    from benchmarks import gemm_bench
    monkeypatch.setattr(gemm_bench, "detect_gpu", lambda: "a GPU")
    monkeypatch.delenv("WORKSHOP_SANDBOX", raising=False)
    monkeypatch.setattr(sys, "argv", ["gemm_bench", "--track", "tensorcores", "--sizes", "8192", "--timing-only"])
    assert gemm_bench.main() == 2
    assert "run it with WORKSHOP_SANDBOX=off" in capsys.readouterr().out


@pytest.mark.parametrize("track", ["gemm", "tensorcores"])
def test_every_variant_launch_compiles_without_spills_and_tiles_the_free_specs_checks(track, tmp_path):
    """`--variants` grades the warp-tiling reference at each VARIANTS launch with a spec copy that lets the launch
    be chosen: every launch must be one the spec accepts, compile for sm_90 without spills, and tile every check
    shape of that copy exactly (the references assume whole tiles)."""
    from benchmarks.gemm_bench import VARIANTS
    from graders.cuda_engine.compile import compile_cuda
    from graders.cuda_engine.spec import resolve_geometry
    kernel = load_spec(spec_for_size((4096,) * 3, tmp_path, free_warptiling=True, track=track)).kernel("warptiling")
    assert kernel.student_geometry
    source = kernel.reference.read_text()
    for block, tile, params in VARIANTS[track]:
        geometry = resolve_geometry(kernel, block, tile, params)
        for m, n, k in kernel.check_shapes:
            assert m % tile[1] == 0 and n % tile[0] == 0 and k % params["BK"] == 0, (block, tile, (m, n, k))
        r = compile_cuda(source, kernels=(kernel.function,), defines=geometry.defines(),
                         arch="sm_90").resources[kernel.function]
        assert (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0), (block, tile, params, r)
