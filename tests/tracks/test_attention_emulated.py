"""The attention track's references are correct, and its known-wrong kernels fail, on the CPU preview's emulation
of CUDA (`graders.cuda_engine.preview`; warps of 32 meet for shuffles, the tensor-core kernels' inline-PTX helpers
are emulated element by element, emulation/ptx.h) at more shapes than the check cell's and, for the softmax and
decode kernels, smaller blocks than the spec's as well; the flash kernels run at the spec's geometry. Indexing,
tile edges, masks, the online rescaling and synchronization are checked, not speed or the GPU's memory model.
"""
from __future__ import annotations

import pytest
from previews import HAVE_GXX, Job, run_all

from graders import tracks
from graders.cuda_engine.spec import Geometry, load_spec, make_geometry

SPEC = load_spec("attention")
WRONG = tracks.get("attention").solutions / "wrong"
SOFTMAX = make_geometry((64, 1), (64, 1), params={"ITEMS": 4})   # rows up to 256 in the one-pass kernel
DECODE = make_geometry((64, 1), (64, 1))
SHAPES = {
    "row_softmax": ((1, 1), (3, 100), (5, 65), (2, 256), (4, 255)),
    "attention_forward": ((1, 2, 97, 97, 64), (1, 2, 33, 70, 128), (1, 2, 70, 33, 64)),
    "attention_decode": ((1, 2, 1, 64), (2, 2, 97, 128), (1, 2, 300, 64)),
}
SHAPES["attention_forward_causal"] = SHAPES["attention_forward"]
# the tensor-core kernel's tiles are 128 rows x 64 keys: two row blocks, four key tiles, both ends partial
SHAPES["attention_forward_tc"] = (*SHAPES["attention_forward"], (1, 2, 130, 200, 128))
SHAPES["attention_forward_causal_tc"] = (*SHAPES["attention_forward_tc"], (1, 2, 200, 130, 64))
WRONG_CASES = {   # name: (shape, what the preview finds)
    "softmax_no_max": ((4, 100), "incorrect"),
    "online_no_rescale": ((1, 2, 97, 97, 64), "incorrect"),
    "causal_off_by_one": ((1, 2, 97, 97, 64), "incorrect"),
    "tile_edge": ((1, 2, 97, 97, 64), "incorrect"),
    "decode_no_max": ((2, 2, 97, 128), "incorrect"),
    "tc_no_rescale": ((1, 2, 97, 97, 64), "incorrect"),
    "causal_no_skip": ((1, 2, 97, 97, 64), "correct"),          # correct; its counter rule fails (on a GPU)
    "tc_causal_no_skip": ((1, 2, 200, 130, 64), "correct"),    # correct; its counter rule fails (on a GPU)
}

pytestmark = pytest.mark.skipif(not HAVE_GXX, reason="the CPU preview needs g++")


def geometry_for(kind: str, spec_geometry: Geometry) -> Geometry:
    return {"row_softmax": SOFTMAX, "attention_decode": DECODE}.get(kind, spec_geometry)


@pytest.fixture(scope="module")
def found():
    jobs = {kid: Job(k, k.reference, geometry_for(k.kind, k.geometry), SHAPES[k.kind])
            for kid, k in SPEC.kernels.items()}
    for name, (shape, _) in WRONG_CASES.items():
        kernel = SPEC.kernel(tracks.graded_kernel(WRONG / f"{name}.cu"))
        jobs[name] = Job(kernel, WRONG / f"{name}.cu", geometry_for(kernel.kind, kernel.geometry), (shape,))
    return run_all(jobs)


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_under_emulation(kernel_id, found):
    assert found[kernel_id].verdict == "correct", found[kernel_id].line


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, found):
    assert found[name].finding == WRONG_CASES[name][1], found[name].line
