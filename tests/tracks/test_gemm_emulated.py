"""The GEMM references are correct, and the known-wrong kernels fail, on the CPU preview's emulation of CUDA
(`graders.cuda_engine.preview`: blocks of fibers run a warp at a time between barriers, in both orders, guarded
buffers, the problem's own checker) at more shapes than the check cell's: any size for kernels 1-5, multiples of
the tiles for 6-10, and the autotuned kernel at another configuration. Indexing, tiling, bounds and
synchronization, not speed or the GPU's memory model; the GPU tests do the rest.
"""
from __future__ import annotations

import pytest
from previews import HAVE_GXX, Job, run_all

from graders import tracks
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.cuda_engine.structure import tune_launch

SPEC = load_spec("gemm")
WRONG = tracks.get("gemm").solutions / "wrong"
# Small shapes: any size for kernels 1-5; for 6-10 multiples of 128 x 256 x 32 (every tile of theirs divides them).
ANY = ((33, 65, 17), (70, 40, 100), (130, 129, 9), (1, 1, 1))
MULTIPLES = ((128, 256, 32), (256, 512, 96))
OTHER_CONFIG = {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8}
WRONG_CASES = {                                   # name: (shape, what the preview finds)
    "wrong_index": ((33, 65, 17), "incorrect"),
    "dropped_k_tail": ((33, 65, 77), "incorrect"),
    "missing_guard": ((70, 40, 100), "out_of_bounds"),
    "scalar_vectorized": ((256, 128, 64), "correct"),   # correct: only its SASS is wrong
    "slow_warptiling": ((128, 256, 64), "correct"),     # correct: only slow
}

pytestmark = pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")


def shapes_for(kernel_id: str):
    tile_x, tile_y = SPEC.kernel(kernel_id).geometry.tile
    return MULTIPLES if all(m % tile_y == 0 and n % tile_x == 0 and k % 32 == 0
                            for m, n, k in SPEC.kernel(kernel_id).check_shapes) else ANY


@pytest.fixture(scope="module")
def found():
    jobs = {kid: Job(k, k.reference, shapes=shapes_for(kid)) for kid, k in SPEC.kernels.items()}
    autotuned = SPEC.kernel("autotuned")
    other = resolve_geometry(autotuned, **tune_launch(OTHER_CONFIG))
    jobs["autotuned-other"] = Job(autotuned, autotuned.reference, other, shapes=((128, 256, 64),))
    for name, (shape, _) in WRONG_CASES.items():
        jobs[name] = Job(SPEC.kernel(tracks.graded_kernel(WRONG / f"{name}.cu")), WRONG / f"{name}.cu", shapes=(shape,))
    return run_all(jobs)


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_under_emulation(kernel_id, found):
    assert found[kernel_id].verdict == "correct", found[kernel_id].line


def test_autotuned_reference_is_correct_at_another_configuration(found):
    assert found["autotuned-other"].verdict == "correct", found["autotuned-other"].line


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, found):
    assert found[name].finding == WRONG_CASES[name][1], found[name].line
