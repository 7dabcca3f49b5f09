"""CUDA C++ kernels in a ``ModelNew``: compiled by the grader with NVRTC, launched on PyTorch's current stream.

A ``ModelNew`` cell imports `cuda_kernel` (``from graders.model_engine.cuda_kernels import cuda_kernel``, the one
import of the grader's its allowlist admits), keeps each kernel's source as a top-level string and builds the
kernel in ``__init__``; ``forward`` launches it with a grid, a block and its arguments::

    RELU = r'''extern "C" __global__ void relu(float* out, const float* x, int n) { ... }'''
    ...
        self.relu = cuda_kernel(RELU, "relu")
    ...
        self.relu((triton.cdiv(n, 256),), (256,), out, x, n)

An argument is a CUDA tensor (passed as its data pointer), an ``int`` (a 32-bit ``int`` in the kernel) or a
``float`` (a 32-bit ``float``); ``shared_bytes=`` sets the launch's dynamic shared memory. The host side of a
launch is the grader's, as in the CUDA C++ tracks: ``torch.utils.cpp_extension.load_inline`` (native host code in
the grading process, beside the reference and the checks) stays refused. A compile error stops the model's
``__init__`` with NVRTC's message, its lines those of the kernel's string. Without a GPU the kernel compiles (for
``sm_90``) but cannot run: a launch raises `NoGPU`, which a check cell reports as ? (the GPU worker grades it).
"""
from __future__ import annotations

import numpy as np

try:
    from cuda.core import Device, LaunchConfig, launch
except ImportError:  # cuda.core before 0.4
    from cuda.core.experimental import Device, LaunchConfig, launch

from graders.cuda_engine.compile import DEFAULT_ARCH, compile_cuda

INT32 = (-(1 << 31), (1 << 31) - 1)


class NoGPU(RuntimeError):
    """A CUDA C++ kernel was launched where there is no GPU (or on tensors that are not on one)."""


class _StreamHandle:
    """A CUDA stream handle in the form cuda.core takes a foreign stream (``__cuda_stream__``)."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.handle


def _dims(value, what: str) -> tuple[int, int, int]:
    """A grid or block as 1 to 3 positive ints, padded with 1s; `ValueError` otherwise."""
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(type(d) is int and d > 0 for d in dims):
        raise ValueError(f"the launch's {what} must be 1 to 3 positive ints, got {value!r}")
    return (*dims, *(1,) * (3 - len(dims)))


def kernel_argument(value, position: int):
    """One launch argument as the kernel receives it (see the module's docstring); `ValueError` or `NoGPU`."""
    import torch
    if isinstance(value, torch.Tensor):
        if not value.is_cuda:
            raise NoGPU(f"argument {position} is a tensor on {value.device}: a CUDA C++ kernel runs on the GPU only")
        return np.uint64(value.data_ptr())
    if type(value) is int:
        if not INT32[0] <= value <= INT32[1]:
            raise ValueError(f"argument {position} = {value} does not fit a 32-bit int")
        return np.int32(value)
    if type(value) is float:
        return np.float32(value)
    raise ValueError(f"argument {position} is a {type(value).__name__}; a kernel takes CUDA tensors, ints and floats")


class CudaKernel:
    """One compiled ``extern "C" __global__`` function; call it to launch it (see the module's docstring)."""

    __slots__ = ("_name", "_kernel", "_device", "_streams")

    def __init__(self, source: str, name: str):
        import torch
        if not isinstance(source, str) or not isinstance(name, str):
            raise ValueError("cuda_kernel(source, name) takes the kernel's CUDA C++ source and its name, two strings")
        gpu = torch.cuda.is_available()
        arch = "sm_{}{}".format(*torch.cuda.get_device_capability()) if gpu else DEFAULT_ARCH
        compiled = compile_cuda(source, kernels=(name,), arch=arch)
        self._name, self._kernel, self._device, self._streams = name, None, None, {}
        if gpu:
            self._device = Device(torch.cuda.current_device())
            self._device.set_current()
            self._kernel = compiled.object_code.get_kernel(name)

    def __call__(self, grid, block, *args, shared_bytes: int = 0) -> None:
        import torch
        config_grid, config_block = _dims(grid, "grid"), _dims(block, "block")
        if type(shared_bytes) is not int or shared_bytes < 0:
            raise ValueError(f"shared_bytes must be an int of at least 0, got {shared_bytes!r}")
        if self._kernel is None:
            raise NoGPU(f"{self._name}: there is no GPU here to launch a CUDA C++ kernel on")
        values = [kernel_argument(a, n) for n, a in enumerate(args, start=1)]
        handle = int(torch.cuda.current_stream().cuda_stream)
        if handle not in self._streams:   # 0: the legacy default stream, PyTorch's unless a stream is set
            self._streams[handle] = self._device.default_stream if handle == 0 else \
                self._device.create_stream(_StreamHandle(handle))
        launch(self._streams[handle], LaunchConfig(grid=config_grid, block=config_block, shmem_size=shared_bytes),
               self._kernel, *values)


def cuda_kernel(source: str, name: str) -> CudaKernel:
    """The kernel ``name`` of ``source`` compiled for this GPU; `graders.cuda_engine.compile.CompileError` with
    NVRTC's message where it does not compile or defines no ``extern "C" __global__`` function ``name``."""
    return CudaKernel(source, name)
