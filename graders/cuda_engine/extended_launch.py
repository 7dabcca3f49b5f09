"""Launches beyond a grid of blocks with pointer and int arguments: what a Hopper kernel needs from the grader.

A spec's kernel may ask (`graders.cuda_engine.spec`; every key inherited from ``[assignment]`` like the geometry):

- ``arch = "sm_90a"``: compile for that target instead of the GPU's own (``wgmma`` and ``setmaxnreg`` exist only on
  sm_90a); the grading GPU must be of the same compute capability (`compile_arch`);
- ``dynamic_smem = BYTES``: the kernel's dynamic shared memory (``extern __shared__``), up to the device's opt-in
  limit per block, which the child raises the kernel's limit to before it launches (`smem_problem` says why a
  spec asks for more than the device allows);
- ``cluster = [X, Y]``: thread-block clusters of X x Y blocks (at most `MAX_CLUSTER_BLOCKS`, the portable size), the
  grid a multiple of it at every shape of the spec (`cluster_problem`);
- ``persistent = true``: the kernel walks the problem's tiles itself; its grid is one row of blocks, one
  an SM (or one a tile, where there are fewer tiles), in whole clusters (`persistent_grid`), and its
  cluster, if any, is ``[X, 1]``;
- ``tensor_maps = [{ operand = "A", box = ["BK", "TILE_Y"], swizzle = "128B" }, ...]``: one kernel parameter each,
  after the sizes, in this order, declared ``const __grid_constant__ CUtensorMap`` (128 bytes, passed by value).
  ``operand`` names a pointer parameter of the problem's signature; the map covers that tensor as the grader
  allocated it (its dtype, its shape and strides, innermost = the dimension of stride 1 first, as in
  ``cuTensorMapEncodeTiled``); ``box`` is the tile one copy moves, innermost first, each an int or a name the
  kernel sees ``#define``d (``BK``, ``TILE_Y``); ``swizzle`` is ``none``, ``32B``, ``64B`` or ``128B``. Interleave
  none, element strides 1, L2 promotion 256 B, out-of-bounds elements read as zero. `map_fields` derives the
  encoding's fields (checked against the driver's rules on the CPU), `encode` calls the driver;
- ``libraries = ["cutlass"]``: header libraries the kernel is compiled against (`graders.cuda_engine.libraries`).

Such a kernel is launched through ``cuLaunchKernelEx`` (cuda.bindings): `launch_config` (grid, block, dynamic
shared memory, the cluster attribute), `KernelArguments` (the ``void**`` array of the arguments, the 128-byte
tensor maps among them, 64-byte aligned). The tensor maps hold the inputs' addresses, so the child encodes them for
each launch's inputs, on the host before the launch is enqueued.
"""
from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass

from graders.cuda_engine.libraries import LIBRARIES

MAX_CLUSTER_BLOCKS = 8          # the portable cluster size (more needs a non-portable attribute)
MAX_BOX = 256                   # cuTensorMapEncodeTiled: each box dimension at most 256 elements
TENSOR_MAP_BYTES = 128          # sizeof(CUtensorMap), 64-byte aligned
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
_ARCH = re.compile(r"sm_(\d+)([a-z]?)")
_TORCH_DTYPES = {"bfloat16": "BFLOAT16", "float16": "FLOAT16", "float32": "FLOAT32", "float64": "FLOAT64",
                 "uint8": "UINT8", "float8_e4m3fn": "UINT8", "float8_e5m2": "UINT8", "int32": "INT32"}


@dataclass(frozen=True)
class TensorMapSpec:
    operand: str                        # a pointer parameter of the problem's signature
    box: tuple[int | str, ...]          # innermost first; a name is one of the kernel's #defines
    swizzle: str = "128B"


@dataclass(frozen=True)
class LaunchFeatures:
    arch: str | None = None
    dynamic_smem: int = 0
    cluster: tuple[int, int] | None = None
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    libraries: tuple[str, ...] = ()     # header libraries compiled against (`graders.cuda_engine.libraries`)
    persistent: bool = False

    @property
    def through_driver(self) -> bool:
        """Launched with ``cuLaunchKernelEx`` and packed arguments (else cuda.core's plain launch)."""
        return bool(self.dynamic_smem or self.cluster or self.tensor_maps)


def operand_names(signature: str) -> list[str]:
    """The pointer parameters of a problem's C signature, in order: ``(float* C, const bf16* A, ...)`` -> C, A."""
    return re.findall(r"\*\s*(\w+)", signature)


def parse_features(raw: dict, signature: str) -> LaunchFeatures:
    """The launch keys of one kernel's (merged) spec table; `ValueError` saying which key is wrong and why."""
    arch = raw.get("arch")
    if arch is not None and (not isinstance(arch, str) or not _ARCH.fullmatch(arch)):
        raise ValueError(f"arch must name a target like \"sm_90a\", got {arch!r}")
    smem = raw.get("dynamic_smem", 0)
    if isinstance(smem, bool) or not isinstance(smem, int) or smem < 0:
        raise ValueError(f"dynamic_smem must be a non-negative int (bytes), got {smem!r}")
    cluster = raw.get("cluster")
    if cluster is not None:
        if (not isinstance(cluster, list) or len(cluster) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in cluster)):
            raise ValueError(f"cluster must be [X, Y], two positive ints, got {cluster!r}")
        if cluster[0] * cluster[1] > MAX_CLUSTER_BLOCKS:
            raise ValueError(f"a cluster of {cluster[0]} x {cluster[1]} blocks is more than the portable "
                             f"{MAX_CLUSTER_BLOCKS}")
        cluster = tuple(cluster)
    persistent = raw.get("persistent", False)
    if not isinstance(persistent, bool):
        raise ValueError(f"persistent must be true or false, got {persistent!r}")
    if persistent and cluster and cluster[1] != 1:
        raise ValueError(f"a persistent kernel's grid is one row of blocks: its cluster must be [X, 1], got "
                         f"[{cluster[0]}, {cluster[1]}]")
    maps = raw.get("tensor_maps", [])
    if not isinstance(maps, list):
        raise ValueError(f"tensor_maps must be a list of tables, got {maps!r}")
    libraries = raw.get("libraries", [])
    if not isinstance(libraries, list) or not set(libraries) <= set(LIBRARIES):
        raise ValueError(f"libraries must list names among {list(LIBRARIES)}, got {libraries!r}")
    return LaunchFeatures(arch, smem, cluster, tuple(_tensor_map(m, operand_names(signature)) for m in maps),
                          tuple(libraries), persistent=persistent)


def _tensor_map(raw, operands: list[str]) -> TensorMapSpec:
    if not isinstance(raw, dict) or set(raw) - {"operand", "box", "swizzle"} or not {"operand", "box"} <= set(raw):
        raise ValueError(f"a tensor map is a table {{ operand = ..., box = [...], swizzle = ... }}, got {raw!r}")
    if raw["operand"] not in operands:
        raise ValueError(f"tensor map operand {raw['operand']!r} is not a pointer parameter of the kernel: "
                         f"{', '.join(operands)}")
    box = raw["box"]
    if (not isinstance(box, list) or not 1 <= len(box) <= 5
            or not all((isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_BOX) or isinstance(v, str)
                       for v in box)):
        raise ValueError(f"tensor map box must list 1 to 5 sizes (ints from 1 to {MAX_BOX} or #define names), "
                         f"got {box!r}")
    swizzle = raw.get("swizzle", "128B")
    if swizzle not in SWIZZLE_BYTES:
        raise ValueError(f"tensor map swizzle must be one of {list(SWIZZLE_BYTES)}, got {swizzle!r}")
    return TensorMapSpec(raw["operand"], tuple(box), swizzle)


def cluster_problem(cluster: tuple[int, int], grid: tuple[int, int, int], label: str) -> str:
    """'' when ``grid`` (blocks) is a whole number of clusters, else why not."""
    if grid[0] % cluster[0] or grid[1] % cluster[1]:
        return (f"at shape {label} the grid of {grid[0]} x {grid[1]} blocks is not a multiple of the cluster "
                f"{cluster[0]} x {cluster[1]}")
    return ""


def persistent_grid(tiles: int, sm_count: int, cluster: tuple[int, int] | None) -> tuple[int, int, int]:
    """A persistent kernel's grid for a problem of ``tiles`` blocks' tiles on a GPU of ``sm_count`` SMs: one
    block an SM, or one a tile where there are fewer, rounded down to whole clusters (at least one)."""
    size = cluster[0] if cluster else 1
    return (max(size, min(tiles, sm_count) // size * size), 1, 1)


def compile_arch(asked: str | None, device_arch: str) -> str:
    """The target to compile for on a GPU of ``device_arch`` (``sm_90``): the spec's where it asks one, which must
    be of the same compute capability (sm_90a code runs on sm_90 only); `RuntimeError` otherwise."""
    if asked is None:
        return device_arch
    if _ARCH.fullmatch(asked).group(1) != _ARCH.fullmatch(device_arch).group(1):
        raise RuntimeError(f"the spec compiles this kernel for {asked}, whose code runs only on GPUs of that compute "
                           f"capability; this GPU is {device_arch}")
    return asked


def smem_problem(asked: int, limit: int, device: str) -> str:
    """'' when ``asked`` bytes of dynamic shared memory fit the device's opt-in ``limit`` per block, else why not."""
    if asked <= limit:
        return ""
    return (f"the spec asks for {asked} bytes of dynamic shared memory per block; {device} allows at most {limit} "
            f"(its opt-in limit per block)")


@dataclass(frozen=True)
class MapFields:
    """The arguments of ``cuTensorMapEncodeTiled`` but the address, innermost dimension first."""

    data_type: str                      # a CU_TENSOR_MAP_DATA_TYPE_ suffix
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]     # bytes, of every dimension but the innermost
    box: tuple[int, ...]
    swizzle: str


def map_fields(spec: TensorMapSpec, dtype: str, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
               defines: dict[str, int]) -> MapFields:
    """``spec`` over a tensor of torch dtype ``dtype`` (``"bfloat16"``), ``shape`` and element ``strides``: its
    dimensions ordered innermost (stride 1) first; `ValueError` where the driver would refuse the encoding."""
    if dtype not in _TORCH_DTYPES:
        raise ValueError(f"tensor map over {spec.operand}: no tensor-map type for {dtype}")
    order = sorted(range(len(shape)), key=lambda d: strides[d])
    if strides[order[0]] != 1:
        raise ValueError(f"tensor map over {spec.operand}: no dimension of stride 1 (strides {strides})")
    dims = tuple(shape[d] for d in order)
    byte_strides = tuple(strides[d] * itemsize for d in order[1:])
    if any(s % 16 for s in byte_strides):
        raise ValueError(f"tensor map over {spec.operand}: strides of {byte_strides} bytes; each must be a "
                         "multiple of 16")
    box = tuple(defines[v] if isinstance(v, str) else v for v in _known(spec.box, defines, spec.operand))
    if len(box) != len(dims):
        raise ValueError(f"tensor map over {spec.operand}: a box of {len(box)} dimensions for a tensor of "
                         f"{len(dims)}")
    if any(not 0 < b <= MAX_BOX for b in box):
        raise ValueError(f"tensor map over {spec.operand}: box {box}; each size from 1 to {MAX_BOX}")
    inner = box[0] * itemsize
    if inner % 16:
        raise ValueError(f"tensor map over {spec.operand}: the box's inner row is {inner} bytes, not a multiple "
                         "of 16")
    if spec.swizzle != "none" and inner > SWIZZLE_BYTES[spec.swizzle]:
        raise ValueError(f"tensor map over {spec.operand}: the box's inner row is {inner} bytes, more than its "
                         f"{spec.swizzle} swizzle span")
    return MapFields(_TORCH_DTYPES[dtype], dims, byte_strides, box, spec.swizzle)


def _known(box: tuple[int | str, ...], defines: dict[str, int], operand: str) -> tuple[int | str, ...]:
    unknown = [v for v in box if isinstance(v, str) and v not in defines]
    if unknown:
        raise ValueError(f"tensor map over {operand}: box names {unknown}, not among the kernel's #defines "
                         f"{sorted(defines)}")
    return box


def encode(fields: MapFields, address: int) -> bytes:
    """The 128-byte tensor map of ``fields`` over the tensor at device ``address`` (``cuTensorMapEncodeTiled``;
    needs the driver). `RuntimeError` with the driver's error where it refuses."""
    from cuda.bindings import driver
    swizzle = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}[fields.swizzle]
    err, tensor_map = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{fields.data_type}"), len(fields.global_dim),
        address, [driver.cuuint64_t(n) for n in fields.global_dim],
        [driver.cuuint64_t(n) for n in fields.global_strides], [driver.cuuint32_t(n) for n in fields.box],
        [driver.cuuint32_t(1)] * len(fields.box),
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzle}"),
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused {fields}: {err.name}")
    return map_bytes(tensor_map)


def map_bytes(tensor_map) -> bytes:
    """The 128 bytes of a ``CUtensorMap`` (its ``opaque`` words are ``cuuint64_t`` objects, not ints)."""
    return struct.pack("<16Q", *(int(word) for word in tensor_map.opaque))


class KernelArguments:
    """A kernel's arguments as ``cuLaunchKernelEx`` takes them: ``address`` is a ``void**`` array whose entries
    point at each argument's bytes (pointers as 64-bit ints, sizes as 32-bit ints, tensor maps as 128 bytes,
    64-byte aligned); the object keeps them alive."""

    def __init__(self, pointers: list[int], sizes: list[int], tensor_maps: list[bytes]):
        self.values: list = [ctypes.c_uint64(p) for p in pointers] + [ctypes.c_int32(s) for s in sizes]
        addresses = [ctypes.addressof(v) for v in self.values]
        for blob in tensor_maps:
            if len(blob) != TENSOR_MAP_BYTES:
                raise ValueError(f"a tensor map is {TENSOR_MAP_BYTES} bytes, got {len(blob)}")
            buffer = ctypes.create_string_buffer(TENSOR_MAP_BYTES + 63)   # ctypes aligns to 16 bytes at most
            start = -ctypes.addressof(buffer) % 64
            ctypes.memmove(ctypes.addressof(buffer) + start, blob, TENSOR_MAP_BYTES)
            self.values.append(buffer)
            addresses.append(ctypes.addressof(buffer) + start)
        self.array = (ctypes.c_void_p * len(addresses))(*addresses)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)


def launch_config(grid: tuple[int, int, int], block: tuple[int, int, int], stream_handle: int,
                  features: LaunchFeatures):
    """The ``CUlaunchConfig`` of a launch: ``grid`` in blocks, the dynamic shared memory and, for clusters, the
    cluster-dimension attribute."""
    from cuda.bindings import driver
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = features.dynamic_smem
    config.hStream = driver.CUstream(stream_handle)
    if features.cluster:
        attribute = driver.CUlaunchAttribute()
        attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attribute.value.clusterDim.x, attribute.value.clusterDim.y = features.cluster
        attribute.value.clusterDim.z = 1
        config.attrs = [attribute]
        config.numAttrs = 1
    return config


def _checked(result, what: str):
    """The value of a cuda.bindings call's ``(err, value)`` (or ``(err,)``); `RuntimeError` naming the CUDA error
    (the child reads an error with CUDA in its text as a crash)."""
    from cuda.bindings import driver
    err, *value = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error in {what}: {err.name}")
    return value[0] if value else None


def allow_dynamic_smem(kernel_handle, device_ordinal: int, asked: int, device_name: str) -> None:
    """Raise the kernel's dynamic shared memory limit to ``asked`` bytes; `ValueError` (`smem_problem`) when the
    device's opt-in limit is lower. ``kernel_handle``: cuda.core's (a CUkernel of a library; a CUfunction of a
    module in older releases)."""
    from cuda.bindings import driver
    device = driver.CUdevice(device_ordinal)
    limit = _checked(driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
        "cuDeviceGetAttribute")
    problem = smem_problem(asked, limit, device_name)
    if problem:
        raise ValueError(problem)
    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if isinstance(kernel_handle, driver.CUfunction):
        _checked(driver.cuFuncSetAttribute(kernel_handle, attribute, asked), "cuFuncSetAttribute")
    else:
        _checked(driver.cuKernelSetAttribute(attribute, asked, driver.CUkernel(int(kernel_handle)), device),
                 "cuKernelSetAttribute")


def launch(kernel_handle, config, arguments: KernelArguments) -> None:
    """``cuLaunchKernelEx`` of ``kernel_handle`` (a CUkernel or CUfunction) with ``config`` and ``arguments``."""
    from cuda.bindings import driver
    _checked(driver.cuLaunchKernelEx(config, driver.CUfunction(int(kernel_handle)), arguments.address, 0),
             "cuLaunchKernelEx")
