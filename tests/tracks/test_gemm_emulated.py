"""The GEMM references run correctly, and the known-wrong kernels fail, on a CPU emulation of CUDA.

No GPU here, so tests/tracks/cuda_emu/cuda_emu.h stands in for the CUDA runtime: each block is BLOCK_X *
BLOCK_Y std::threads meeting at a barrier in __syncthreads(). The kernel is compiled with g++ (with the spec's
#defines; tests/tracks/emu_build.py) and linked with tests/tracks/cuda_emu/gemm_driver.cpp, which launches it
once on buffers from files. Everything else is the grader's own: `EmulatedBench.check` is
`graders.cuda_engine.child.Bench.check` (inputs fenced with NaN, C poisoned with NaN between canary guards,
the guard check, the sgemm checker and its messages), only the launch goes through the driver. This checks
indexing, tiling, bounds and synchronization, not speed or the GPU memory model; the GPU tests do the rest.
"""
from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from emu_build import CXX, EMU, EmuBuilder

from graders import tracks
from graders.cuda_engine.child import Bench
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import Geometry, load_spec, resolve_geometry
from graders.cuda_engine.structure import tune_launch
from graders.result import Status

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec("gemm")
WRONG = ROOT / "tracks/gemm/solutions/wrong"
# Small shapes: any size for kernels 1-5; for 6-10 multiples of 128 x 256 x 32 (every tile of theirs divides them).
ANY = [(33, 65, 17), (70, 40, 100), (130, 129, 9), (1, 1, 1)]
MULTIPLES = [(128, 256, 32), (256, 512, 96)]
OTHER_CONFIG = {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8}
WRONG_CASES = {                                   # name: (shape, the status the grader's check gives)
    "wrong_index": ((33, 65, 17), Status.INCORRECT),
    "dropped_k_tail": ((33, 65, 77), Status.INCORRECT),
    "missing_guard": ((70, 40, 100), Status.OOB_WRITE),
    "scalar_vectorized": ((256, 128, 64), Status.OK),   # correct: only its SASS is wrong
    "slow_warptiling": ((128, 256, 64), Status.OK),     # correct: only slow
}

pytestmark = pytest.mark.skipif(CXX is None, reason="needs g++ (C++20) for the CPU emulation")


class EmulatedBench(Bench):
    """The grader's bench with the launch done by a compiled driver: every buffer goes to a file whole
    (guards included), the driver runs the kernel on it and writes C's buffer back."""

    def __init__(self, exe: Path, geometry: Geometry, tmp: Path):
        super().__init__(problem("sgemm"), geometry, seed=0)
        self.exe, self.tmp = exe, tmp

    def launch(self, out, inputs: list, shape) -> None:
        args = [*self.problem.grid(shape, self.geometry.tile)[:2], *self.geometry.block, *shape]
        for name, tensor in zip("CAB", (out, *inputs)):
            whole(tensor).numpy().tofile(self.tmp / f"{name}.bin")
            args += [self.tmp / f"{name}.bin", tensor.storage_offset()]
        subprocess.run([str(self.exe), *map(str, args)], check=True, timeout=120)
        whole(out).copy_(self.torch.from_file(str(self.tmp / "C.bin"), size=whole(out).numel()))


def whole(tensor):
    """The whole buffer ``tensor`` is a view of, guards included, as a flat tensor."""
    import torch
    return torch.empty(0, dtype=tensor.dtype).set_(tensor.untyped_storage())


def build(builder: EmuBuilder, source: Path, function: str, geometry: Geometry) -> tuple[Path, Geometry]:
    return builder.executable(source, function, geometry.defines(), EMU / "gemm_driver.cpp"), geometry


def check(built: tuple[Path, Geometry], shape, tmp: Path) -> dict:
    """The grader's check (`Bench.check`) of one emulated launch at ``shape``: ok, status and message."""
    return EmulatedBench(*built, tmp).check(shape)


def wrong_kernel(name: str):
    path = WRONG / f"{name}.cu"
    return path, SPEC.kernel(tracks.graded_kernel(path))


@pytest.fixture(scope="module")
def executables(tmp_path_factory) -> dict[str, tuple[Path, Geometry]]:
    """Every reference and known-wrong kernel with its launch geometry, built in parallel (g++ takes a few
    seconds each)."""
    builder = EmuBuilder(tmp_path_factory.mktemp("cuda-emu"), ["-std=c++20", "-O1", "-fno-strict-aliasing"],
                         [EMU / "cuda_emu.h"], timeout=120)
    jobs = {kid: (k.reference, k.function, k.geometry) for kid, k in SPEC.kernels.items()}
    tuned = resolve_geometry(SPEC.kernel("autotuned"), **tune_launch(OTHER_CONFIG))
    jobs["autotuned-other"] = (SPEC.kernel("autotuned").reference, "sgemm_autotuned", tuned)
    for name in WRONG_CASES:
        path, kernel = wrong_kernel(name)
        jobs[name] = (path, kernel.function, kernel.geometry)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {key: pool.submit(build, builder, *job) for key, job in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


def shapes_for(kernel_id: str):
    tile_x, tile_y = SPEC.kernel(kernel_id).geometry.tile
    return MULTIPLES if all(m % tile_y == 0 and n % tile_x == 0 and k % 32 == 0
                            for m, n, k in SPEC.kernel(kernel_id).check_shapes) else ANY


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_under_emulation(kernel_id, executables, tmp_path):
    for shape in shapes_for(kernel_id):
        result = check(executables[kernel_id], shape, tmp_path)
        assert result["ok"], (kernel_id, result["message"])


def test_autotuned_reference_is_correct_at_another_configuration(executables, tmp_path):
    result = check(executables["autotuned-other"], (128, 256, 64), tmp_path)
    assert result["ok"], result["message"]


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, executables, tmp_path):
    shape, status = WRONG_CASES[name]
    result = check(executables[name], shape, tmp_path)
    assert result["status"] == status, result["message"]
    assert status in tracks.expected_statuses(WRONG / f"{name}.cu")
