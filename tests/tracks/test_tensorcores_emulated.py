"""The tensor-core worklog's references are correct on the CPU preview's emulation of CUDA
(`graders.cuda_engine.preview`: warps of 32 meet for ldmatrix, mma.sync and WMMA, whose inline-PTX helpers are
emulated element by element from the PTX ISA's fragment layouts, emulation/ptx.h) at more K slabs than pipeline
stages and more blocks than the check cell's shapes; and the known-wrong kernels fail there: a wrong fragment
layout, an fp16 running sum, and a pipeline without its barrier (a race, found by running warps ahead of each
other in both orders). Indexing, swizzles, the pipeline's stage rotation, fragment layouts and tile edges are
checked, not speed or the GPU's memory model.
"""
from __future__ import annotations

import pytest
from previews import HAVE_GXX, Job, run_all

from graders import tracks
from graders.cuda_engine.spec import load_spec

SPEC = load_spec("tensorcores")
WRONG = tracks.get("tensorcores").solutions / "wrong"


def _depth(kernel_id: str) -> int:
    return dict(SPEC.kernel(kernel_id).geometry.params).get("BK", 16)


# per kernel: one block with a single K slab, and several blocks over more slabs than pipeline stages
SHAPES = {kid: ((k.geometry.tile[1], k.geometry.tile[0], _depth(kid)),
                (2 * k.geometry.tile[1], 3 * k.geometry.tile[0], 5 * _depth(kid))) for kid, k in SPEC.kernels.items()}
WRONG_CASES = {"transposed_fragment": ((64, 128, 96), "incorrect"),
               "fp8_f16_accumulate": ((256, 384, 320), "incorrect"),
               "no_stage_barrier": ((128, 192, 160), "race"),
               "unswizzled": ((128, 192, 160), "correct")}   # correct: only its bank conflicts (ncu) are wrong

pytestmark = pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")


@pytest.fixture(scope="module")
def found():
    jobs = {kid: Job(k, k.reference, shapes=SHAPES[kid]) for kid, k in SPEC.kernels.items()}
    for name, (shape, _) in WRONG_CASES.items():
        jobs[name] = Job(SPEC.kernel(tracks.graded_kernel(WRONG / f"{name}.cu")), WRONG / f"{name}.cu", shapes=(shape,))
    return run_all(jobs)


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_under_emulation(kernel_id, found):
    assert found[kernel_id].verdict == "correct", found[kernel_id].line


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, found):
    assert found[name].finding == WRONG_CASES[name][1], found[name].line
