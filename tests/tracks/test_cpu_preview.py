"""The CPU preview (`graders.cuda_engine.preview`) agrees with the GPU grader wherever it judges, over every CUDA
track's references and known-wrong solutions, at the check cell's own shapes: a reference is correct (✓); a
known-wrong solution that loses its correctness points is wrong (✗) or cannot be run (?), never ✓; one that keeps
them (only slow, or failing a SASS or counter rule) is ✓ or ?. What it finds for each known-wrong solution is
pinned in FINDINGS, so that a change in what the emulation catches shows here. Solutions that NVRTC refuses
(status compile_error) never reach the preview: the check cell stops at the compiler's message.

Also the two bugs of issue 28 in a tiled transpose (no __syncthreads(); a loop past the tile), a deadlock, another
signature, and the check cell's and the graded cell's public part's output through `graders.cuda_engine.grade`.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from previews import HAVE_GXX, Job, run_all

from graders import tracks
from graders.cuda_engine import grade, preview
from graders.cuda_engine.spec import load_spec

pytestmark = pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")

# the debugging track's cells run no preview: its bugs show only at shapes past the preview's, to the GPU's tools;
# the Hopper and CUTLASS tracks' kernels are wgmma and TMA, which the emulation lacks (tests/tracks/test_hopper.py:
# its "?"; the CUTLASS kernels' dynamic shared memory alone makes it "?"); the NVFP4 track's last three steps are a
# cluster's (tests/tracks/test_nvfp4.py previews the others, and those with their cluster helpers replaced); the
# serving track's references and known-wrong solutions are previewed in tests/tracks/test_serving.py
CUDA_TRACKS = [t for t in tracks.all_tracks()
               if t.engine == "cuda" and t.name not in ("debugging", "hopper", "cutlass", "nvfp4", "serving")]
FINDINGS = {   # track/solution: what the preview finds at the check cell's shapes
    "vecadd/missing_guard": "out_of_bounds", "vecadd/no_tail": "incorrect", "vecadd/off_by_one": "out_of_bounds",
    "transpose/hang": "timeout", "transpose/illegal_address": "out_of_bounds",
    "transpose/lazy_after_warmup": "device_state",   # wrong only after 200,000 blocks: state kept between launches
    "transpose/missing_guard": "out_of_bounds", "transpose/no_work": "incorrect",
    "transpose/off_by_one": "out_of_bounds", "transpose/oob_writer": "out_of_bounds", "transpose/slow_tiled": "correct",
    "gemm/dropped_k_tail": "incorrect", "gemm/missing_guard": "out_of_bounds", "gemm/scalar_vectorized": "correct",
    "gemm/slow_warptiling": "correct", "gemm/wrong_index": "incorrect",
    "attention/causal_no_skip": "correct", "attention/causal_off_by_one": "incorrect",
    "attention/decode_no_max": "incorrect", "attention/materialised_scores": "device_state",
    "attention/online_no_rescale": "incorrect", "attention/softmax_no_max": "incorrect",
    "attention/tc_causal_no_skip": "correct", "attention/tc_no_rescale": "incorrect",
    "attention/tile_edge": "incorrect",
    "tensorcores/fp16_accumulate": "unsupported",   # inline PTX in the kernel itself
    "tensorcores/fp32_simt": "correct", "tensorcores/fp8_e5m2": "unsupported",   # mma.sync .e5m2: not emulated
    "tensorcores/fp8_f16_accumulate": "incorrect", "tensorcores/no_stage_barrier": "race",
    "tensorcores/transposed_fragment": "incorrect", "tensorcores/unswizzled": "correct",
    "tensorcores/wmma_for_mma": "correct",
}
HANG_LIMIT_S = 2   # the hanging kernel's time limit here (the check cell's is preview.TIME_LIMIT_S)


def _solutions() -> dict[str, tuple[tracks.Track, Path, str, bool | None]]:
    """key -> (track, source, kernel id, whether the GPU grader keeps its correctness points: None for a reference)."""
    found = {}
    for track in CUDA_TRACKS:
        spec = load_spec(track.name)
        for kid, kernel in spec.kernels.items():
            found[f"{track.name}/{kid} (reference)"] = (track, kernel.reference, kid, None)
        for path in track.wrong_solutions():
            kid = tracks.graded_kernel(path)
            if "compile_error" in tracks.expected_statuses(path):
                continue
            points = tracks.expected_points(path)[f"{kid}_score"]   # only a correct kernel earns points
            found[f"{track.name}/{path.stem}"] = (track, path, kid, not points.matches(0))
    return found


SOLUTIONS = _solutions()
TILED = load_spec("transpose").kernel("tiled")
ISSUE = {   # the tiled transpose with the bugs of issue 28
    "no_barrier": TILED.reference.read_text().replace("    __syncthreads();\n", ""),
    "past_the_tile": TILED.reference.read_text().replace("j < TILE_Y; j += BLOCK_Y)", "j <= TILE_Y; j += BLOCK_Y)"),
}
DEADLOCK = """extern "C" __global__ void vecadd(float* out, const float* a, const float* b, int n)
{
    const int i = blockIdx.x * BLOCK_X + threadIdx.x;
    float v = i < n ? a[i] + b[i] : 0.0f;
    if (threadIdx.x % 32 < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);   // lanes 16-31 never come
    __syncthreads();
    if (i < n) out[i] = v;
}
"""

OTHER_SIGNATURE = """extern "C" __global__ void vecadd(float* out, const float* a, int n)
{
    const int i = blockIdx.x * BLOCK_X + threadIdx.x;
    if (i < n) out[i] = 2 * a[i];
}
"""


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict[str, preview.Preview]:
    """Every solution's preview at the check cell's shapes, and the issue's and the deadlock's sources."""
    folder = tmp_path_factory.mktemp("sources")
    jobs = {}
    for key, (track, path, kid, _) in SOLUTIONS.items():
        jobs[key] = Job(load_spec(track.name).kernel(kid), path,
                        time_limit_s=HANG_LIMIT_S if key == "transpose/hang" else preview.TIME_LIMIT_S)
    for name, source in ISSUE.items():
        (folder / f"{name}.cu").write_text(source)
        jobs[name] = Job(TILED, folder / f"{name}.cu")
    for name, source in {"deadlock": DEADLOCK, "other_signature": OTHER_SIGNATURE}.items():
        (folder / f"{name}.cu").write_text(source)
        jobs[name] = Job(load_spec("vecadd").kernel("add"), folder / f"{name}.cu")
    return run_all(jobs)


def test_every_known_wrong_solution_has_a_finding():
    assert sorted(FINDINGS) == sorted(k for k, (_, _, _, keeps) in SOLUTIONS.items() if keeps is not None)


@pytest.mark.parametrize("key", list(SOLUTIONS))
def test_the_preview_agrees_with_the_gpu_grader(key, found):
    _, _, kid, keeps = SOLUTIONS[key]
    result = found[key]
    if keeps is None:
        assert result.verdict == "correct", result.line
    else:
        assert result.verdict in (("correct", "cannot_run") if keeps else ("wrong", "cannot_run")), result.line
        assert result.finding == FINDINGS[key], result.line
    line = result.line
    assert line.startswith(f"{result.mark} {kid}: ")
    assert {"correct": "(not the grade" in line or "; not the grade" in line, "wrong": f"{kid}: CPU preview" in line,
            "cannot_run": line.endswith(("the GPU worker grades it", "the GPU worker still grades"))}[result.verdict]


def test_a_missing_barrier_is_a_race(found):
    result = found["no_barrier"]
    assert (result.finding, result.shape) == ("race", (33, 65)), result.line
    assert result.line.startswith("✗ tiled: CPU preview, shape 33 x 65 (rows, cols): a race (a missing "
                                  "__syncthreads()?) or a read of __shared__ memory no thread wrote: the result "
                                  "depends on the order in which threads run between barriers, or on what __shared__ "
                                  "memory held before; with threads in increasing order, ")
    assert "got nan (NaN: what __shared__ memory held before any thread wrote it)" in result.line


def test_a_loop_past_the_tile_writes_outside_the_shared_tile(found):
    result = found["past_the_tile"]
    assert result.line == ("✗ tiled: CPU preview, shape 33 x 65 (rows, cols): writes past the end of the __shared__ "
                           "array `tile` (byte 4096 of its 4096) in block (0, 0), thread (0, 0)")


def test_a_warp_call_that_half_the_warp_skips_is_a_deadlock(found):
    result = found["deadlock"]
    assert result.finding == "deadlock", result.line
    assert result.reason == ("the block's threads never meet: thread 0 waits at a warp-level call (__shfl_*_sync, "
                             "__syncwarp, ...) that lanes of its warp named in the mask never reach, while thread 16 "
                             "waits at __syncthreads()")


def test_a_kernel_with_another_signature_is_wrong(found):
    assert found["other_signature"].reason == (
        "the kernel takes 2 pointer(s) and 1 int(s); the grader passes 3 and 1, as in the signature (float* out, "
        "const float* a, const float* b, int n)")


def test_the_check_cell_and_the_graded_cells_public_part(monkeypatch, capsys):
    """Without a GPU the check cell adds the preview's line; the graded cell's public part raises on a ✗ (so
    ``nbgrader validate`` fails) and passes a ✓."""
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    grade.detect_gpu.cache_clear()
    try:
        grade.check("transpose", "tiled", ISSUE["no_barrier"])
        compiled, previewed = capsys.readouterr().out.splitlines()
        assert compiled.startswith("transpose_tiled compiles for ") and previewed.startswith("✗ tiled: CPU preview")
        with pytest.raises(grade.KernelFailed) as failed:
            grade.assert_compiles("transpose", "tiled", ISSUE["no_barrier"])
        assert str(failed.value).startswith("tiled: CPU preview, shape 33 x 65 (rows, cols): a race ")
        grade.assert_compiles("transpose", "tiled", TILED.reference.read_text())
        assert capsys.readouterr().out.splitlines() == [
            "✓ tiled compiles; correctness and speed are checked on the GPU worker.",
            "✓ tiled: correct at 3 small shapes on the CPU preview (1 x 1, 33 x 65, 4097 x 31; not the grade: speed "
            "and real races are judged on the GPU worker)"]
    finally:
        grade.detect_gpu.cache_clear()


@pytest.mark.parametrize("path", [p for t in CUDA_TRACKS for p in t.wrong_solutions()
                                  if "compile_error" in tracks.expected_statuses(p)],
                         ids=lambda p: p.parent.parent.parent.name)
def test_a_kernel_nvrtc_refuses_gets_the_compilers_message_and_no_preview(path, monkeypatch, capsys):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    grade.detect_gpu.cache_clear()
    try:
        grade.check(path.parent.parent.parent.name, tracks.graded_kernel(path), path.read_text())
    finally:
        grade.detect_gpu.cache_clear()
    out = capsys.readouterr().out
    assert "error" in out and "CPU preview" not in out


def test_without_gxx_the_preview_says_so(monkeypatch):
    monkeypatch.setattr(preview, "toolchain", lambda: None)
    kernel = load_spec("vecadd").kernel("add")
    result = preview.run_preview(kernel, kernel.geometry, kernel.reference.read_text(), [(1,)])
    assert result.line == "? add: the CPU preview needs g++; the GPU worker still grades"


def test_an_emulated_helper_after_a_define_keeps_the_define_and_the_line_numbers():
    """A ``#define`` just before an inline-PTX helper that ptx.h emulates stays (the kernel uses it), and the helper's
    name is read past it and its continued lines, not from their parentheses."""
    source = ('#define WARPS (BLOCK_X / 32)\n#define HALF(x) \\\n    half_of(x)\n'
              '__device__ unsigned sub_f16x2(unsigned a, unsigned b)\n{\n    unsigned r;\n'
              '    asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));\n    return r;\n}\nint after;\n')
    text, replaced = preview.emulated_source(source)
    assert replaced == ["sub_f16x2"] and "asm" not in text
    assert text.splitlines()[:3] == source.splitlines()[:3] and text.count("\n") == source.count("\n")
    assert text.splitlines()[9] == "int after;"
