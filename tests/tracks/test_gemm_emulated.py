"""The GEMM references run correctly, and the known-wrong kernels fail, on a CPU emulation of CUDA.

No GPU here, so tests/tracks/cuda_emu/cuda_emu.h stands in for the CUDA runtime: each block is BLOCK_X * BLOCK_Y
std::threads meeting at a barrier in __syncthreads(). The kernel is compiled with g++ (with the spec's
#defines), run on random inputs at each size with C poisoned with NaN and fenced by canaries, and compared
with a float64 product (tests/tracks/cuda_emu/gemm_driver.cpp, the grader's tolerances). This checks indexing,
tiling, bounds and synchronization, not speed or the GPU memory model; the GPU tests do the rest.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graders import tracks
from graders.cuda_engine.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
EMU = ROOT / "tests/tracks/cuda_emu"
SPEC = load_spec("gemm")
CXX = shutil.which("g++")
WRONG = ROOT / "tracks/gemm/solutions/wrong"
# Small shapes: any size for kernels 1-5; for 6-10 multiples of 128 x 256 x 32 (every tile of theirs divides them).
ANY = [(33, 65, 17), (70, 40, 100), (130, 129, 9), (1, 1, 1)]
MULTIPLES = [(128, 256, 32), (256, 512, 96)]
OTHER_CONFIG = {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8}
WRONG_CASES = {                                   # name: (shape, how the driver's verdict starts)
    "wrong_index": ((33, 65, 17), "fail"),
    "dropped_k_tail": ((33, 65, 77), "fail"),
    "missing_guard": ((70, 40, 100), "fail oob_write"),
    "scalar_vectorized": ((256, 128, 64), "ok"),   # correct: only its SASS is wrong
    "slow_warptiling": ((128, 256, 64), "ok"),     # correct: only slow
}

pytestmark = pytest.mark.skipif(CXX is None, reason="needs g++ (C++20) for the CPU emulation")


def build(source: Path, function: str, defines: dict[str, int], tmp: Path) -> Path:
    exe = tmp / f"{source.stem}-{function}-{abs(hash(tuple(sorted(defines.items()))))}"
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    subprocess.run([CXX, "-std=c++20", "-O1", "-fno-strict-aliasing", "-w", "-pthread", "-include",
                    str(EMU / "cuda_emu.h"), f"-DKERNEL={function}", *flags, "-x", "c++", str(source),
                    "-x", "c++", str(EMU / "gemm_driver.cpp"), "-o", str(exe)], check=True, timeout=120)
    return exe


def run(exe: Path, shape) -> str:
    done = subprocess.run([str(exe), *map(str, shape)], capture_output=True, text=True, timeout=120)
    return done.stdout.strip().splitlines()[-1]


def wrong_kernel(name: str):
    path = WRONG / f"{name}.cu"
    return path, SPEC.kernel(tracks.graded_kernel(path))


@pytest.fixture(scope="module")
def executables(tmp_path_factory) -> dict[str, Path]:
    """Every reference and known-wrong kernel, built in parallel (g++ takes a few seconds each)."""
    from graders.cuda_engine.spec import resolve_geometry
    from graders.cuda_engine.structure import tune_launch
    tmp = tmp_path_factory.mktemp("cuda-emu")
    jobs = {kid: (k.reference, k.function, k.geometry.defines()) for kid, k in SPEC.kernels.items()}
    tuned = resolve_geometry(SPEC.kernel("autotuned"), **tune_launch(OTHER_CONFIG))
    jobs["autotuned-other"] = (SPEC.kernel("autotuned").reference, "sgemm_autotuned", tuned.defines())
    for name in WRONG_CASES:
        path, kernel = wrong_kernel(name)
        jobs[name] = (path, kernel.function, kernel.geometry.defines())
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        futures = {key: pool.submit(build, *job, tmp) for key, job in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


def shapes_for(kernel_id: str):
    tile_x, tile_y = SPEC.kernel(kernel_id).geometry.tile
    return MULTIPLES if all(m % tile_y == 0 and n % tile_x == 0 and k % 32 == 0
                            for m, n, k in SPEC.kernel(kernel_id).check_shapes) else ANY


@pytest.mark.parametrize("kernel_id", list(SPEC.kernels))
def test_reference_is_correct_under_emulation(kernel_id, executables):
    for shape in shapes_for(kernel_id):
        assert run(executables[kernel_id], shape).startswith("ok"), (kernel_id, shape)


def test_autotuned_reference_is_correct_at_another_configuration(executables):
    assert run(executables["autotuned-other"], (128, 256, 64)).startswith("ok")


@pytest.mark.parametrize("name", list(WRONG_CASES))
def test_known_wrong_kernels_under_emulation(name, executables):
    shape, expected = WRONG_CASES[name]
    assert run(executables[name], shape).startswith(expected)
