"""The attention track's references run correctly, and its known-wrong kernels fail, on a CPU emulation of
CUDA (tests/tracks/cuda_emu: a block is BLOCK_X * BLOCK_Y std::threads, warps of 32 meet at barriers of their
own for shuffles). Each kernel is compiled with g++ (tests/tracks/emu_build.py), linked with
tests/tracks/cuda_emu/attention_driver.cpp and launched once per check on buffers written to files; everything
else is the grader's own (`graders.cuda_engine.child.Bench.check`: fenced inputs, the NaN-poisoned output
between canary guards, the problem's checker). Small shapes and, for the softmax and decode kernels, smaller
blocks than the spec's (threads are OS threads here); the flash kernels run at the spec's geometry. Indexing,
tile edges, masks, the online rescaling and synchronization are checked, not speed or the GPU's memory model.
The tensor-core kernel's inline PTX (its wrappers of ldmatrix, mma.sync, cp.async, cvt and ex2) is replaced by
the header's element-by-element emulation of the same instructions (`without_inline_ptx`).
"""
from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from emu_build import CXX, EMU, EmuBuilder

from graders import tracks
from graders.cuda_engine.child import Bench
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import Geometry, load_spec, make_geometry
from graders.result import Status

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec("attention")
WRONG = ROOT / "tracks/attention/solutions/wrong"
DRIVER_KIND = {"row_softmax": "SOFTMAX", "attention_forward": "FORWARD", "attention_forward_causal": "FORWARD",
               "attention_forward_tc": "FORWARD", "attention_forward_causal_tc": "FORWARD",
               "attention_decode": "DECODE"}
SOFTMAX = make_geometry((64, 1), (64, 1), params={"ITEMS": 4})   # rows up to 256 in the one-pass kernel
DECODE = make_geometry((64, 1), (64, 1))
SHAPES = {
    "row_softmax": [(1, 1), (3, 100), (5, 65), (2, 256), (4, 255)],
    "attention_forward": [(1, 2, 97, 97, 64), (1, 2, 33, 70, 128), (1, 2, 70, 33, 64)],
    "attention_decode": [(1, 2, 1, 64), (2, 2, 97, 128), (1, 2, 300, 64)],
}
SHAPES["attention_forward_causal"] = SHAPES["attention_forward"]
# the tensor-core kernel's tiles are 128 rows x 64 keys: two row blocks, four key tiles, both ends partial
SHAPES["attention_forward_tc"] = [*SHAPES["attention_forward"], (1, 2, 130, 200, 128)]
SHAPES["attention_forward_causal_tc"] = [*SHAPES["attention_forward_tc"], (1, 2, 200, 130, 64)]
WRONG_CASES = {   # name: (shape, the status the grader's check gives)
    "softmax_no_max": ((4, 100), Status.INCORRECT),
    "online_no_rescale": ((1, 2, 97, 97, 64), Status.INCORRECT),
    "causal_off_by_one": ((1, 2, 97, 97, 64), Status.INCORRECT),
    "tile_edge": ((1, 2, 97, 97, 64), Status.INCORRECT),
    "decode_no_max": ((2, 2, 97, 128), Status.INCORRECT),
    "tc_no_rescale": ((1, 2, 97, 97, 64), Status.INCORRECT),
    "causal_no_skip": ((1, 2, 97, 97, 64), Status.OK),   # correct; its counter rule fails (on a GPU)
    "materialised_scores": ((2, 2, 97, 97, 128), Status.OK),   # correct; its cubin fails no_global_scratch
    "tc_causal_no_skip": ((1, 2, 200, 130, 64), Status.OK),    # correct; its counter rule fails (on a GPU)
}

pytestmark = pytest.mark.skipif(CXX is None, reason="needs g++ (C++20) for the CPU emulation")


def geometry_for(kind: str, spec_geometry: Geometry) -> Geometry:
    return {"row_softmax": SOFTMAX, "attention_decode": DECODE}.get(kind, spec_geometry)


class EmulatedBench(Bench):
    """The grader's bench with the launch done by the compiled driver: every buffer goes to a file whole
    (guards included), the driver runs the kernel on it and writes the output's buffer back."""

    def __init__(self, exe: Path, kind: str, geometry: Geometry, tmp: Path):
        super().__init__(problem(kind), geometry, seed=0)
        self.exe, self.tmp = exe, tmp

    def launch(self, out, inputs: list, shape) -> None:
        args = [*self.problem.grid(shape, self.geometry.tile)[:2], *self.geometry.block, 1 + len(inputs)]
        for i, tensor in enumerate((out, *inputs)):
            path = self.tmp / f"buffer{i}.bin"
            whole(tensor).view(self.torch.uint8).numpy().tofile(path)   # bytes: numpy has no bf16
            args += [path, tensor.storage_offset() * tensor.element_size()]
        subprocess.run([str(self.exe), *map(str, [*args, *self.problem.sizes(shape)])], check=True, timeout=300)
        whole(out).copy_(self.torch.from_file(str(self.tmp / "buffer0.bin"), size=whole(out).numel()))


def whole(tensor):
    """The whole buffer ``tensor`` is a view of, guards included, as a flat tensor."""
    import torch
    return torch.empty(0, dtype=tensor.dtype).set_(tensor.untyped_storage())


_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def without_inline_ptx(source: str) -> str:
    """``source`` without its top-level functions whose body holds ``asm``: cuda_emu.h defines them instead."""
    blank = _STRING_OR_COMMENT.sub(lambda m: " " * len(m.group()), source)   # braces in strings do not count
    keep, start, depth = [], 0, 0
    for i, ch in enumerate(blank):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if depth == 0 and ch in ";}":
            part = blank[start:i + 1]
            keep.append("" if ch == "}" and re.search(r"\basm\b", part) else source[start:i + 1])
            start = i + 1
    return "".join(keep) + source[start:]


def build(builder: EmuBuilder, source: Path, function: str, kind: str, geometry: Geometry) -> Path:
    emulated = builder.folder / f"{source.stem}-{function}.cu"
    emulated.write_text(without_inline_ptx(source.read_text()))
    return builder.executable(emulated, function, geometry.defines(), EMU / "attention_driver.cpp",
                              {f"KIND_{DRIVER_KIND[kind]}": 1})


@pytest.fixture(scope="module")
def executables(tmp_path_factory) -> dict[str, tuple[Path, str, Geometry]]:
    """Every reference and known-wrong kernel, built in parallel, with its kind and emulated geometry."""
    builder = EmuBuilder(tmp_path_factory.mktemp("attention-emu"), ["-std=c++20", "-O1", "-fno-strict-aliasing",
                                                                   "-mcmodel=medium"], [EMU / "cuda_emu.h"])
    jobs = {kid: (k.reference, k.function, k.kind, geometry_for(k.kind, k.geometry)) for kid, k in SPEC.kernels.items()}
    for name in WRONG_CASES:
        kernel = SPEC.kernel(tracks.graded_kernel(WRONG / f"{name}.cu"))
        jobs[name] = (WRONG / f"{name}.cu", kernel.function, kernel.kind, geometry_for(kernel.kind, kernel.geometry))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {key: pool.submit(build, builder, *job) for key, job in jobs.items()}
        return {key: (f.result(), jobs[key][2], jobs[key][3]) for key, f in futures.items()}


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_under_emulation(kernel_id, executables, tmp_path):
    exe, kind, geometry = executables[kernel_id]
    for shape in SHAPES[kind]:
        result = EmulatedBench(exe, kind, geometry, tmp_path).check(shape)
        assert result["ok"], (kernel_id, result["message"])


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, executables, tmp_path):
    shape, status = WRONG_CASES[name]
    exe, kind, geometry = executables[name]
    result = EmulatedBench(exe, kind, geometry, tmp_path).check(shape)
    assert result["status"] == status, result["message"]
    expected = tracks.expected_statuses(WRONG / f"{name}.cu")
    assert status in expected or (status == Status.OK and expected == ("unmet",))
