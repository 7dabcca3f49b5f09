"""The engine's Hopper launches without a GPU (`graders.cuda_engine.extended_launch`): the spec keys ``arch``,
``dynamic_smem``, ``cluster``, ``persistent``, ``tensor_maps``, ``sass_requirements`` and ``warp_specialised`` read
and refused at their edges; a persistent kernel's grid; the tensor maps' encoding fields derived from a tensor as
the grader allocates it; the ``void**`` argument array with its 128-byte tensor maps; the launch configuration with
its cluster attribute; the child's launch through ``cuLaunchKernelEx`` with the driver calls replaced.
``cuTensorMapEncodeTiled`` itself needs the driver (it fails here: no libcuda), so the encoding is left to
tests/gpu/test_hopper_gpu.py."""
from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import pytest
import torch

from graders.cuda_engine import child, extended_launch
from graders.cuda_engine.extended_launch import (KernelArguments, LaunchFeatures, MapFields, TensorMapSpec,
                                                 compile_arch, launch_config, map_fields, operand_names,
                                                 persistent_grid, smem_problem)
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import SpecError, load_spec, parse_spec

SIGNATURE = "(float* C, const bf16* A, const bf16* B, int M, int N, int K)"
PATH = Path("/course/tracks/demo/spec.toml")
KERNEL = {"id": "k", "function": "k", "kind": "bf16gemm_kmajor", "check_shapes": [[64, 256, 64]],
          "perf_shape": [128, 512, 64], "block": [128, 1], "tile": [128, 64], "params": {"BK": 64}, "floor": 0.1,
          "target": 0.5, "points_correct": 1, "points_perf": 2}


def spec_with(**keys):
    return parse_spec({"assignment": {"name": "demo", "engine": "cuda"}, "kernel": [KERNEL | keys]}, PATH).kernel("k")


def spec_error(**keys) -> str:
    with pytest.raises(SpecError) as caught:
        spec_with(**keys)
    return str(caught.value).removeprefix(f"{PATH} [[kernel]] #1 (k): ")


def test_a_kernel_without_the_keys_launches_as_before():
    kernel = spec_with()
    assert kernel.launch == LaunchFeatures() and not kernel.launch.through_driver and kernel.sass_requirements == ()
    assert all(k.launch == LaunchFeatures() for k in load_spec("tensorcores").kernels.values())


def test_the_keys_are_read_and_inherited_from_the_assignment():
    data = {"assignment": {"name": "demo", "engine": "cuda", "arch": "sm_90a", "dynamic_smem": 99328,
                           "cluster": [2, 1]},
            "kernel": [KERNEL | {"tensor_maps": [{"operand": "A", "box": ["BK", "TILE_Y"]},
                                                 {"operand": "B", "box": [64, 128], "swizzle": "64B"}],
                                 "sass_requirements": ["wgmma", "tma"]}]}
    kernel = parse_spec(data, PATH).kernel("k")
    assert kernel.launch == LaunchFeatures("sm_90a", 99328, (2, 1), (TensorMapSpec("A", ("BK", "TILE_Y"), "128B"),
                                                                      TensorMapSpec("B", (64, 128), "64B")))
    assert kernel.launch.through_driver and kernel.sass_requirements == ("wgmma", "tma")
    assert LaunchFeatures(arch="sm_90a").through_driver is False   # sm_90a alone: cuda.core's plain launch


@pytest.mark.parametrize("keys, message", [
    ({"arch": "hopper"}, "arch must name a target like \"sm_90a\", got 'hopper'"),
    ({"arch": 90}, "arch must name a target like \"sm_90a\", got 90"),
    ({"dynamic_smem": -1}, "dynamic_smem must be a non-negative int (bytes), got -1"),
    ({"dynamic_smem": 1.5}, "dynamic_smem must be a non-negative int (bytes), got 1.5"),
    ({"cluster": [2]}, "cluster must be [X, Y], two positive ints, got [2]"),
    ({"cluster": [0, 1]}, "cluster must be [X, Y], two positive ints, got [0, 1]"),
    ({"cluster": [4, 4]}, "a cluster of 4 x 4 blocks is more than the portable 8"),
    ({"cluster": [4, 1]}, "at shape 64x256x64 the grid of 2 x 1 blocks is not a multiple of the cluster 4 x 1"),
    ({"persistent": 1}, "persistent must be true or false, got 1"),
    ({"persistent": True, "cluster": [1, 2]},
     "a persistent kernel's grid is one row of blocks: its cluster must be [X, 1], got [1, 2]"),
    ({"block": [384, 1], "tile": [256, 128]}, "tile 256x128 must be a multiple of block 384x1"),
    ({"warp_specialised": "yes"}, "'warp_specialised' must be a bool, got 'yes'"),
    ({"tensor_maps": {"operand": "A"}}, "tensor_maps must be a list of tables, got {'operand': 'A'}"),
    ({"tensor_maps": [{"operand": "D", "box": [64]}]},
     "tensor map operand 'D' is not a pointer parameter of the kernel: C, A, B"),
    ({"tensor_maps": [{"operand": "A", "box": [64, 512]}]},
     "tensor map box must list 1 to 5 sizes (ints from 1 to 256 or #define names), got [64, 512]"),
    ({"tensor_maps": [{"operand": "A", "box": [64, 64], "swizzle": "256B"}]},
     "tensor map swizzle must be one of ['none', '32B', '64B', '128B'], got '256B'"),
    ({"tensor_maps": [{"operand": "A", "box": [64, 64], "interleave": "16B"}]},
     "a tensor map is a table { operand = ..., box = [...], swizzle = ... }, got "
     "{'operand': 'A', 'box': [64, 64], 'interleave': '16B'}"),
])
def test_each_launch_key_is_refused_with_what_is_wrong(keys, message):
    assert spec_error(**keys) == message


def test_a_warp_specialised_block_need_not_divide_its_tile():
    """Its warpgroups take roles (a producer, consumers), not a share of the tile each: 384 threads on 256 x 128."""
    kernel = spec_with(block=[384, 1], tile=[256, 128], warp_specialised=True)
    assert kernel.warp_specialised and kernel.geometry.block == (384, 1) and kernel.geometry.tile == (256, 128)
    assert not spec_with().warp_specialised


def test_a_persistent_kernels_grid_is_one_row_of_whole_clusters_however_the_tiles_fall():
    """The tile grid's clusters are not checked (64x256x64 is 2 x 1 tiles, less than a cluster of 4); the launch
    grid is one block an SM, or a tile, rounded down to whole clusters."""
    kernel = spec_with(persistent=True, cluster=[4, 1])
    assert kernel.launch.persistent and kernel.launch.cluster == (4, 1) and kernel.launch.through_driver
    assert persistent_grid(256, 132, (2, 1)) == (132, 1, 1)    # 4096^3 in 128 x 256 tiles on an H100 or H200
    assert persistent_grid(256, 133, (2, 1)) == (132, 1, 1)    # whole clusters
    assert persistent_grid(180, 132, (4, 1)) == (132, 1, 1)
    assert persistent_grid(6, 132, (4, 1)) == (4, 1, 1)        # fewer tiles than SMs: one a tile, whole clusters
    assert persistent_grid(2, 132, (4, 1)) == (4, 1, 1)        # at least one cluster
    assert persistent_grid(5, 132, None) == (5, 1, 1) and persistent_grid(500, 132, None) == (132, 1, 1)


def test_sass_requirements_are_names_the_child_reads_from_the_sass():
    assert spec_error(sass_requirements=["hgmma"]).startswith(
        "sass_requirements must be a list of names among ['e4m3', 'ldg128', ")
    allowed = spec_error(sass_requirements=["mma_sync"]).partition(", got")[0]
    assert "'wgmma'" in allowed and "'mma_sync'" not in allowed   # read from the PTX, which the child does not make


def test_the_operands_of_a_signature_are_its_pointers_in_order():
    assert operand_names(SIGNATURE) == ["C", "A", "B"]
    assert operand_names(problem("transpose").signature) == ["out", "in"]


def test_the_compile_target_is_the_gpus_unless_the_spec_names_one_of_its_capability():
    assert compile_arch(None, "sm_90") == "sm_90"
    assert compile_arch("sm_90a", "sm_90") == "sm_90a"
    with pytest.raises(RuntimeError) as caught:
        compile_arch("sm_90a", "sm_100")
    assert str(caught.value) == ("the spec compiles this kernel for sm_90a, whose code runs only on GPUs of that "
                                 "compute capability; this GPU is sm_100")


def test_dynamic_shared_memory_over_the_devices_opt_in_limit_is_refused_in_words():
    assert smem_problem(232448, 232448, "NVIDIA H200") == ""
    assert smem_problem(232449, 232448, "NVIDIA H200") == (
        "the spec asks for 232449 bytes of dynamic shared memory per block; NVIDIA H200 allows at most 232448 "
        "(its opt-in limit per block)")


# --- tensor maps --------------------------------------------------------------------------------------

DEFINES = {"BLOCK_X": 128, "BLOCK_Y": 1, "TILE_X": 128, "TILE_Y": 64, "BK": 64}


def test_a_row_major_operands_map_lists_its_dimensions_innermost_first():
    a = torch.empty(320, 1088, dtype=torch.bfloat16)
    fields = map_fields(TensorMapSpec("A", ("BK", "TILE_Y")), "bfloat16", tuple(a.shape), a.stride(),
                        a.element_size(), DEFINES)
    assert fields == MapFields("BFLOAT16", (1088, 320), (1088 * 2,), (64, 64), "128B")


def test_a_column_major_operands_map_starts_from_its_stride_1_dimension():
    """B of bf16gemm_kmajor is a K x N view of a row-major N x K: K is innermost."""
    b = problem("bf16gemm_kmajor").make_inputs((64, 256, 192), torch.Generator().manual_seed(0))[1]
    assert tuple(b.shape) == (192, 256) and b.stride() == (1, 192)
    fields = map_fields(TensorMapSpec("B", ("BK", "TILE_X")), str(b.dtype).removeprefix("torch."), tuple(b.shape),
                        b.stride(), b.element_size(), DEFINES)
    assert fields == MapFields("BFLOAT16", (192, 256), (192 * 2,), (64, 128), "128B")


@pytest.mark.parametrize("spec, shape, strides, message", [
    (TensorMapSpec("A", (128, 64)), (64, 1024), (1024, 1),
     "the box's inner row is 256 bytes, more than its 128B swizzle span"),
    (TensorMapSpec("A", (64, 64), "32B"), (64, 1024), (1024, 1),
     "the box's inner row is 128 bytes, more than its 32B swizzle span"),
    (TensorMapSpec("A", (4, 64), "none"), (64, 1024), (1024, 1), "the box's inner row is 8 bytes, not a multiple of 16"),
    (TensorMapSpec("A", (64, 64)), (64, 1028), (1028, 1), "strides of (2056,) bytes; each must be a multiple of 16"),
    (TensorMapSpec("A", (64, 64)), (64, 1024), (2048, 2), "no dimension of stride 1 (strides (2048, 2))"),
    (TensorMapSpec("A", (64,)), (64, 1024), (1024, 1), "a box of 1 dimensions for a tensor of 2"),
    (TensorMapSpec("A", ("BK", "BM")), (64, 1024), (1024, 1),
     "box names ['BM'], not among the kernel's #defines ['BK', 'BLOCK_X', 'BLOCK_Y', 'TILE_X', 'TILE_Y']"),
])
def test_what_the_driver_would_refuse_is_said_before_it_is_asked(spec, shape, strides, message):
    with pytest.raises(ValueError) as caught:
        map_fields(spec, "bfloat16", shape, strides, 2, DEFINES)
    assert str(caught.value) == f"tensor map over A: {message}"


def test_the_driver_encoding_needs_a_driver():
    """cuTensorMapEncodeTiled is a driver call: without libcuda (this machine) it cannot run, so the CPU tests stop
    at its fields; the bindings take the arguments first (cuda.bindings 13 takes sizes only as cuuint64_t and
    cuuint32_t, a TypeError for plain ints), so what stops it here is the missing driver, nothing before."""
    _stops_at_the_missing_driver(
        lambda: extended_launch.encode(MapFields("BFLOAT16", (64, 64), (128,), (64, 64), "128B"), 1 << 20))


def test_the_encoded_map_is_read_back_as_its_128_bytes():
    """The bindings' CUtensorMap holds its 16 words as cuuint64_t objects, which struct takes only as ints."""
    driver = pytest.importorskip("cuda.bindings.driver")
    tensor_map = driver.CUtensorMap()
    tensor_map.opaque = [driver.cuuint64_t(7 + i) for i in range(16)]
    assert extended_launch.map_bytes(tensor_map) == blob(7)


def test_the_launch_takes_its_arguments_as_the_bindings_want_them():
    """cuLaunchKernelEx with a cluster's configuration and packed arguments: as with the encoding, what stops it here
    is the missing driver, not the types of the configuration, the kernel handle or the argument array."""
    config = extended_launch.launch_config((8, 4, 1), (384, 1, 1), 0,
                                           LaunchFeatures(dynamic_smem=200_000, cluster=(2, 1)))
    _stops_at_the_missing_driver(
        lambda: extended_launch.launch(1 << 20, config, KernelArguments([1 << 21, 1 << 22], [64], [blob(1)])))


def _stops_at_the_missing_driver(call) -> None:
    """``call`` (a driver call through cuda.bindings) fails here for want of libcuda, not on its arguments."""
    pytest.importorskip("cuda.bindings")
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("a driver is present: tests/gpu/test_hopper_gpu.py makes the driver's calls")
    with pytest.raises(Exception) as caught:
        call()
    assert not isinstance(caught.value, (TypeError, ValueError)) and "driver" in str(caught.value), caught.value


# --- the arguments and the launch configuration ---------------------------------------------------------

def blob(seed: int) -> bytes:
    return struct.pack("<16Q", *range(seed, seed + 16))


def test_the_argument_array_points_at_each_argument_in_order():
    arguments = KernelArguments([0x7F0000001000, 0x7F0000002000], [320, 256, 1088], [blob(1), blob(100)])
    slots = (ctypes.c_void_p * 7).from_address(arguments.address)
    read = [ctypes.string_at(slots[i], size) for i, size in enumerate([8, 8, 4, 4, 4, 128, 128])]
    assert [int.from_bytes(r, "little") for r in read[:2]] == [0x7F0000001000, 0x7F0000002000]
    assert [int.from_bytes(r, "little", signed=True) for r in read[2:5]] == [320, 256, 1088]
    assert read[5:] == [blob(1), blob(100)]
    assert slots[5] % 64 == 0 and slots[6] % 64 == 0   # CUtensorMap is 64-byte aligned


def test_a_tensor_map_is_128_bytes():
    with pytest.raises(ValueError, match="a tensor map is 128 bytes, got 64"):
        KernelArguments([1], [2], [bytes(64)])


def test_the_launch_configuration_carries_the_dynamic_shared_memory_and_the_cluster():
    from cuda.bindings import driver
    config = launch_config((4, 2, 1), (128, 1, 1), 77, LaunchFeatures(dynamic_smem=99328, cluster=(2, 1)))
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (4, 2, 1)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ) == (128, 1, 1)
    assert config.sharedMemBytes == 99328 and int(config.hStream) == 77 and config.numAttrs == 1
    attribute = config.attrs[0]
    assert attribute.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z) == (2, 1, 1)
    plain = launch_config((4, 2, 1), (128, 1, 1), 0, LaunchFeatures(dynamic_smem=1024))
    assert plain.numAttrs == 0 and plain.sharedMemBytes == 1024


def test_the_child_launches_a_hopper_kernel_with_its_tensor_maps_after_the_sizes(monkeypatch):
    """`Harness.launch` of the Hopper track's TMA kernel, the driver calls replaced: pointers, sizes, then one map
    per spec entry over that launch's tensor, and the configuration of the spec's launch."""
    kernel = load_spec("hopper").kernel("tma")
    calls = []
    monkeypatch.setattr(extended_launch, "encode", lambda fields, address: calls.append((fields, address))
                        or blob(len(calls)))
    launched = []
    monkeypatch.setattr(extended_launch, "launch", lambda handle, config, arguments: launched.append(
        (handle, config, arguments)))
    bench = object.__new__(child.Harness)
    bench.torch, bench.problem, bench.geometry = torch, problem(kernel.kind), kernel.geometry
    bench.features, bench.stream, bench.kernel = kernel.launch, type("S", (), {"handle": 5})(), \
        type("K", (), {"handle": "the kernel"})()
    shape = (192, 384, 192)
    a, b = bench.problem.make_inputs(shape, torch.Generator().manual_seed(1))
    out = torch.empty(192, 384)
    bench.launch(out, [a, b], shape)
    assert calls == [(MapFields("BFLOAT16", (192, 192), (384,), (64, 64), "128B"), a.data_ptr()),
                     (MapFields("BFLOAT16", (192, 384), (384,), (64, 128), "128B"), b.data_ptr())]
    (handle, config, arguments), = launched
    assert handle == "the kernel"
    assert (config.gridDimX, config.gridDimY, config.blockDimX, config.sharedMemBytes, int(config.hStream)) == (
        3, 3, 128, 0, 5)
    slots = (ctypes.c_void_p * 8).from_address(arguments.address)
    read = [ctypes.string_at(slots[i], size) for i, size in enumerate([8, 8, 8, 4, 4, 4, 128, 128])]
    assert [int.from_bytes(r, "little") for r in read[:6]] == [out.data_ptr(), a.data_ptr(), b.data_ptr(), 192,
                                                                384, 192]
    assert read[6:] == [blob(1), blob(2)]


def test_the_child_launches_the_persistent_kernel_once_an_sm_with_a_map_over_c(monkeypatch):
    """The persistent step at a shape of 180 tiles on a GPU of 132 SMs: 132 blocks in one row, clusters of 2 x 1,
    its dynamic shared memory, and a third map over the fp32 output C (32 x 64 boxes, 128-byte rows)."""
    kernel = load_spec("hopper").kernel("persistent")
    calls = []
    monkeypatch.setattr(extended_launch, "encode", lambda fields, address: calls.append((fields, address))
                        or blob(len(calls)))
    launched = []
    monkeypatch.setattr(extended_launch, "launch", lambda handle, config, arguments: launched.append(config))
    bench = object.__new__(child.Harness)
    bench.torch, bench.problem, bench.geometry = torch, problem(kernel.kind), kernel.geometry
    bench.features, bench.stream, bench.kernel = kernel.launch, type("S", (), {"handle": 5})(), \
        type("K", (), {"handle": "the kernel"})()
    bench.sm_count = 132
    shape = (2304, 2560, 1088)
    a, b = bench.problem.make_inputs(shape, torch.Generator().manual_seed(1))
    out = torch.empty(2304, 2560)
    bench.launch(out, [a, b], shape)
    assert calls == [(MapFields("BFLOAT16", (1088, 2304), (2176,), (64, 128), "128B"), a.data_ptr()),
                     (MapFields("BFLOAT16", (1088, 2560), (2176,), (64, 128), "128B"), b.data_ptr()),
                     (MapFields("FLOAT32", (2560, 2304), (10240,), (32, 64), "128B"), out.data_ptr())]
    config, = launched
    assert (config.gridDimX, config.gridDimY, config.gridDimZ, config.blockDimX) == (132, 1, 1, 384)
    assert config.sharedMemBytes == 230400 and config.numAttrs == 1
    assert (config.attrs[0].value.clusterDim.x, config.attrs[0].value.clusterDim.y) == (2, 1)


def test_a_plain_kernel_still_launches_through_cuda_core(monkeypatch):
    kernel = load_spec("hopper").kernel("wgmma")
    assert kernel.launch.arch == "sm_90a" and not kernel.launch.through_driver
    monkeypatch.setattr(extended_launch, "launch", lambda *args: pytest.fail("launched through the driver"))
    recorded = []
    monkeypatch.setattr(child, "LaunchConfig", lambda **config: config)
    monkeypatch.setattr(child, "launch", lambda *args: recorded.append(args))
    bench = object.__new__(child.Harness)
    bench.torch, bench.problem, bench.geometry, bench.features = torch, problem(kernel.kind), kernel.geometry, \
        kernel.launch
    bench.stream, bench.kernel = "the stream", "the kernel"
    bench.launch(torch.empty(64, 128), [torch.empty(64, 64), torch.empty(64, 128)], (64, 128, 64))
    (stream, config, handle, *args), = recorded
    assert config == {"grid": (1, 1, 1), "block": (128, 1, 1)} and len(args) == 6


def test_the_child_checks_the_specs_sass_requirements_beside_the_problems():
    """`check_and_time` asks the bench for the kernel's own requirements after the problem's, records both, and a
    kernel short of one is unmet (correctness points only)."""
    from graders.result import Status
    kernel = load_spec("hopper").kernel("wgmma")

    class Bench(child.Bench):
        def load(self, source, function):
            return {}

        def launch(self, out, inputs, shape):
            out.copy_(inputs[0].double() @ inputs[1].double())

        def sass_failures(self, function, *extra):
            self.asked = (function, extra)
            return ["no HGMMA"]

        def time(self, shape, budget_s):
            return {"kernel": {"throughput": 1.0}, "ceiling": {}, "work_unit": "FLOP"}

    bench = Bench(problem(kernel.kind), kernel.geometry, seed=3)
    small = type(kernel)(**{**kernel.__dict__, "check_shapes": ((64, 128, 64),), "perf_shape": (64, 128, 64)})
    answer = child.check_and_time(bench, small, "src", 1.0)
    assert bench.asked == ("hopper_wgmma", ("wgmma",))
    assert answer["sass"] == {"requirements": ["tensor_cores", "wgmma"], "unmet": ["no HGMMA"]}
    assert answer["status"] == Status.UNMET
