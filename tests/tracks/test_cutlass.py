"""The CUTLASS track without a GPU: every reference compiled with NVRTC for sm_90a against CUTLASS's headers
(`graders.cuda_engine.libraries`), its SASS showing what Hopper's GEMM needs (HGMMA, UTMALDG, SYNCS) within the
structure child's compile limit; each known-wrong solution whose mistake a compile shows failing to compile, or
lacking what its step's SASS needs, as its ``status:`` line says; CuTe's shared-memory layouts, evaluated on the
host, putting every element where the tensor maps' 128-byte swizzle writes it (and the 64-byte atom's not); the fp16
kind's inputs and baseline; the ``libraries`` key and the headers' lookup at their edges; the check cell's line.
Whether the kernels are right and how fast they are is tests/gpu/test_cutlass_gpu.py's.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import types
from pathlib import Path

import pytest

from graders import settings, tracks
from graders.cuda_engine import grade, libraries, sass
from graders.cuda_engine.compile import CompileError, Compiled, compile_cuda
from graders.cuda_engine.grade import check
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import SpecError, load_spec, parse_spec
from graders.cuda_engine.structure import COMPILE_TIMEOUT_S

SPEC = load_spec("cutlass")
WRONG = {p.name: p for p in tracks.get("cutlass").wrong_solutions()}
# The known-wrong solutions whose mistake a compile shows: NVRTC refuses them, or their SASS lacks what their step
# needs. The others compile to the step's SASS and are wrong only in what they compute: tests/gpu/test_cutlass_gpu.py
# and the GPU's nbgrader run grade them (a CuTe kernel takes 7-25 s to compile here).
SHOWN_BY_COMPILE = {name: path for name, path in WRONG.items()
                    if set(tracks.expected_statuses(path)) & {"compile_error", "unmet"}}


def _requirements(kid: str) -> tuple[str, ...]:
    """What a kernel's SASS must show: the kind's and the spec's requirements."""
    kernel = SPEC.kernel(kid)
    return tuple(dict.fromkeys((*problem(kernel.kind).sass_requirements, *kernel.sass_requirements)))


_OUTCOMES: dict[tuple[str, str], Compiled | CompileError] = {}


def _compile_once(source: str, **options) -> Compiled:
    """`compile_cuda`, each source with the same options compiled once in this module (a CuTe kernel takes 7-25 s;
    NVRTC gives the same cubin and log each time): the check cell's compile of a reference is `compiled`'s."""
    key = (source, repr(sorted(options.items())))
    if key not in _OUTCOMES:
        try:
            _OUTCOMES[key] = compile_cuda(source, **options)
        except CompileError as exc:
            _OUTCOMES[key] = exc
    if isinstance(_OUTCOMES[key], CompileError):
        raise _OUTCOMES[key]
    return _OUTCOMES[key]


def _compile(kid: str, source: str) -> Compiled:
    kernel = SPEC.kernel(kid)
    return _compile_once(source, kernels=(kernel.function,), defines=kernel.geometry.defines(),
                         arch=kernel.launch.arch, libraries=kernel.launch.libraries)


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple]:
    """Each reference and each known-wrong solution whose compile shows its mistake (`SHOWN_BY_COMPILE`) compiled
    once: (the Compiled or the CompileError, seconds)."""
    found = {}
    sources = {f"{kid}.reference": (kid, k.reference) for kid, k in SPEC.kernels.items()}
    sources |= {name: (tracks.graded_kernel(path), path) for name, path in SHOWN_BY_COMPILE.items()}
    for name, (kid, path) in sources.items():
        start = time.monotonic()
        try:
            outcome = _compile(kid, path.read_text())
        except CompileError as exc:
            outcome = exc
        found[name] = (kid, outcome, time.monotonic() - start)
    return found


def test_the_spec_compiles_against_cutlass_for_sm_90a():
    for kernel in SPEC.kernels.values():
        assert kernel.launch.libraries == ("cutlass",) and kernel.launch.arch == "sm_90a"
        persistent = kernel.id == "ws"   # with C's tensor map and the epilogue's store buffers
        assert kernel.launch.persistent == persistent
        assert [m.operand for m in kernel.launch.tensor_maps] == ["A", "B", "C"][:3 if persistent else 2]
        assert kernel.launch.dynamic_smem == (230400 if persistent else 197632)
    assert SPEC.targets == "measured" and all(k.target > k.floor for k in SPEC.kernels.values())
    assert problem(SPEC.kernel("fp16").kind).signature == "(float* C, const f16* A, const f16* B, int M, int N, int K)"


@pytest.mark.parametrize("kid", list(SPEC.kernels))
def test_each_reference_compiles_without_spills_and_its_sass_is_hoppers(compiled, kid):
    _, outcome, seconds = compiled[f"{kid}.reference"]
    assert not isinstance(outcome, CompileError), str(outcome)
    function = SPEC.kernel(kid).function
    usage = outcome.resources[function]
    assert usage.spill_stores in (0, None) and usage.spill_loads in (0, None)
    failures, _ = sass.check(outcome.cubin, function, _requirements(kid), disassemble_always=False)
    assert failures == []
    instructions = set(re.findall(r"HGMMA\.[\w.]+", sass.disassemble(outcome.cubin)[function]))
    assert instructions == {"HGMMA.64x256x16.F32.BF16" if kid == "bf16" else "HGMMA.64x256x16.F32"}   # fp16: no suffix
    assert seconds < COMPILE_TIMEOUT_S   # the structure child's limit on one compile


def test_each_known_wrong_solution_compiles_or_not_as_its_status_line_says(compiled):
    for name, path in SHOWN_BY_COMPILE.items():
        kid, outcome, _ = compiled[name]
        if tracks.expected_statuses(path) == ("compile_error",):
            assert isinstance(outcome, CompileError), name
            assert "Not a canonical GMMA_K Layout" in str(outcome) and "of your_kernel.cu" in str(outcome)
            continue
        assert not isinstance(outcome, CompileError), f"{name}: {outcome}"
        failures, _ = sass.check(outcome.cubin, SPEC.kernel(kid).function, _requirements(kid),
                                 disassemble_always=False)
        missing = ["USETMAXREG"] if kid == "ws" else ["UTMALDG", "SYNCS"]   # correct, without what its step needs
        assert all(any(m in f for f in failures) for m in missing) and len(failures) == len(missing), name
    assert len(SHOWN_BY_COMPILE) == 3 and {tracks.graded_kernel(p) for p in WRONG.values()} == set(SPEC.kernels)


# Every element's byte offset in CuTe's shared tiles (an smem pointer tensor, the swizzle applied to the address as on
# the GPU) against where a TMA copy with the 128-byte swizzle puts element (m, k) of stage s: rows of 128 bytes, the
# 16-byte chunk k / 8 at chunk (k / 8) ^ (m % 8).
LAYOUTS = r"""
#include <cstdio>
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
using namespace cute;
using Element = cutlass::bfloat16_t;
alignas(1024) static Element buffer[256 * 64 * 4];
template <class Atom, int ROWS> long misplaced() {
  Tensor t = make_tensor(make_smem_ptr(buffer), tile_to_shape(Atom{}, Shape<Int<ROWS>, _64, _4>{}));
  long bad = 0;
  for (int s = 0; s < 4; ++s) for (int m = 0; m < ROWS; ++m) for (int k = 0; k < 64; ++k) {
    long tma = (long)s * ROWS * 128 + m * 128 + (((k / 8) ^ (m % 8)) * 16) + (k % 8) * 2;
    bad += (char*)raw_pointer_cast(&t(m, k, s)) - (char*)buffer != tma;
  }
  return bad;
}
int main() {
  printf("%ld %ld %ld\n", misplaced<GMMA::Layout_K_SW128_Atom<Element>, 128>(),
         misplaced<GMMA::Layout_K_SW128_Atom<Element>, 256>(), misplaced<GMMA::Layout_K_SW64_Atom<Element>, 128>());
}
"""
TOOLKIT = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "include"


@pytest.mark.skipif(not shutil.which("g++") or not (TOOLKIT / "crt" / "host_defines.h").is_file(),
                    reason="needs g++ and a CUDA toolkit's headers (CuTe's host build includes cuda_runtime_api.h)")
def test_cutes_swizzled_tiles_are_where_the_tensor_maps_put_each_element(tmp_path):
    (tmp_path / "layouts.cpp").write_text(LAYOUTS)
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{libraries.cutlass_include()}", f"-I{TOOLKIT}",
                    f"-I{TOOLKIT / 'cccl'}", "layouts.cpp", "-o", "layouts"], cwd=tmp_path, check=True)
    a, b, wrong = map(int, subprocess.run([str(tmp_path / "layouts")], capture_output=True, text=True,
                                          check=True).stdout.split())
    assert (a, b) == (0, 0)   # A's 128 x 64 and B's 256 x 64 tiles, every stage
    assert wrong > 0          # the known-wrong 64-byte atom's tiles are not the maps'


def test_the_fp16_kind_multiplies_k_major_fp16_inputs():
    import torch

    definition = problem("f16gemm_kmajor")
    a, b = definition.make_inputs((64, 128, 96), torch.Generator().manual_seed(0))
    assert a.dtype == b.dtype == torch.float16 and a.stride() == (96, 1) and b.stride() == (1, 96)
    out = torch.full((64, 128), float("nan"))
    definition.baseline(out, [a, b])
    assert definition.compare(out, definition.reference([a, b])) == ""


def test_the_check_cell_compiles_against_cutlass(compiled, capsys, monkeypatch):
    """The check cell's compile, with the options `compiled` used for the reference, is answered from there."""
    monkeypatch.setenv("WORKSHOP_CPU_PREVIEW", "off")
    monkeypatch.setattr(grade, "compile_cuda", _compile_once)
    check("cutlass", "fp16", SPEC.kernel("fp16").reference.read_text())
    line = capsys.readouterr().out
    assert "cutlass_gemm_fp16 compiles for sm_90a" in line and "no spills" in line


def test_without_the_library_key_cutlass_is_not_found():
    with pytest.raises(CompileError, match="cute/tensor.hpp"):
        compile_cuda('#include <cute/tensor.hpp>\nextern "C" __global__ void k(float* x) { x[0] = 1.0f; }',
                     kernels=("k",), arch="sm_90a")


def test_the_libraries_key_names_known_libraries_only():
    raw = {"assignment": {"name": "cutlass", "engine": "cuda", "targets": "provisional", "points_correct": 1,
                          "points_perf": 2, "libraries": ["thrust"]},
           "kernel": [{"id": "k", "function": "k", "kind": "f16gemm_kmajor", "check_shapes": [[128, 128, 64]],
                       "perf_shape": [128, 128, 64], "block": [128, 1], "tile": [128, 128], "floor": 0.1,
                       "target": 0.5}]}
    with pytest.raises(SpecError, match="libraries must list names among"):
        parse_spec(raw, SPEC.path)
    raw["assignment"]["libraries"] = []
    assert parse_spec(raw, SPEC.path).kernel("k").launch.libraries == ()


def test_missing_headers_are_named_with_what_to_install(monkeypatch):
    libraries.cutlass_include.cache_clear()
    monkeypatch.setattr(libraries.importlib.util, "find_spec", lambda name: None)
    try:
        with pytest.raises(libraries.LibraryMissing, match="pip install --no-deps nvidia-cutlass==4.2.0.0"):
            libraries.include_paths(("cutlass",))
    finally:
        monkeypatch.undo()
        libraries.cutlass_include.cache_clear()
    assert libraries.include_paths(()) == []
    with pytest.raises(ValueError, match="unknown libraries"):
        libraries.include_paths(("thrust",))


def test_the_cuda_headers_and_libcu_may_come_from_folders_of_their_own(tmp_path, monkeypatch):
    """The runtime's and CCCL's wheels installed each in a folder of its own (``pip install --target``), or only a
    toolkit: each is found where it is."""
    runtime, cccl, toolkit = (tmp_path / name for name in ("runtime", "cccl", "toolkit"))
    (runtime / "nvidia" / "cu13" / "include").mkdir(parents=True)
    (runtime / "nvidia" / "cu13" / "include" / "cuda_fp16.h").touch()
    (cccl / "nvidia" / "cu13" / "include" / "cccl" / "cuda" / "std").mkdir(parents=True)
    (cccl / "nvidia" / "cu13" / "include" / "cccl" / "cuda" / "std" / "cstdint").touch()
    found = types.SimpleNamespace(submodule_search_locations=[str(runtime / "nvidia"), str(cccl / "nvidia")])
    monkeypatch.setattr(libraries.importlib.util, "find_spec", lambda name: found)
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    libraries.cuda_includes.cache_clear()
    try:
        cccl_include = cccl / "nvidia" / "cu13" / "include"
        assert libraries.cuda_includes() == (runtime / "nvidia" / "cu13" / "include", cccl_include,
                                             cccl_include / "cccl")
        found.submodule_search_locations = []
        libraries.cuda_includes.cache_clear()
        with pytest.raises(libraries.LibraryMissing, match="nvidia-cuda-runtime nvidia-cuda-cccl"):
            libraries.cuda_includes()
        (toolkit / "include" / "cccl" / "cuda" / "std").mkdir(parents=True)
        (toolkit / "include" / "cccl" / "cuda" / "std" / "cstdint").touch()
        (toolkit / "include" / "cuda_fp16.h").touch()
        libraries.cuda_includes.cache_clear()
        assert libraries.cuda_includes() == (toolkit / "include", toolkit / "include" / "cccl")
    finally:
        libraries.cuda_includes.cache_clear()


def test_the_installed_headers_are_the_pinned_cutlass_and_every_install_says_so():
    from importlib import metadata
    assert metadata.version("nvidia-cutlass") == libraries.CUTLASS_VERSION
    assert (libraries.cutlass_include() / "cute" / "atom" / "mma_traits_sm90_gmma.hpp").is_file()
    requirement = libraries.INSTALL.removeprefix("pip install ")
    for path in ("README.md", ".ci/run"):
        assert requirement in (settings.ROOT / path).read_text(), path
