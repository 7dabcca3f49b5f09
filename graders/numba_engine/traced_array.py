"""Global arrays that count every read and write by the simulated CUDA thread that makes it.

Passed to a kernel running in numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``), where each CUDA thread
is a Python thread carrying its ``blockIdx`` and ``threadIdx``. Any index outside the array, negative ones
included, raises ``IndexError`` naming the array and index: on a GPU that access would be undefined.
Every access counts, also one made while the kernel prints: a GPU reads what it prints from global memory
too. Those made inside `printing` are also noted apart (`AccessLog.printed`), so that a message over the
limits can say how many of a thread's accesses its prints made.
"""
from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

ThreadKey = tuple[tuple[int, ...], tuple[int, ...]]   # (blockIdx, threadIdx)
Kind = Literal["reads", "writes"]
_printing = threading.local()


@contextlib.contextmanager
def printing():
    """Accesses the calling (simulated CUDA) thread makes inside the block count as usual and are also noted
    as made while printing."""
    depth = getattr(_printing, "depth", 0)
    _printing.depth = depth + 1
    try:
        yield
    finally:
        _printing.depth = depth


@dataclass
class AccessLog:
    """Per-thread read and write counts shared by all traced arrays of one launch."""

    reads: dict[ThreadKey, int] = field(default_factory=lambda: defaultdict(int))
    writes: dict[ThreadKey, int] = field(default_factory=lambda: defaultdict(int))
    # (kind, thread): how many of those accesses the thread made inside `printing`
    printed: dict[tuple[Kind, ThreadKey], int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: Kind) -> None:
        key = _current_thread_key()
        with self.lock:
            getattr(self, kind)[key] += 1
            if getattr(_printing, "depth", 0):
                self.printed[kind, key] += 1

    def block_writes(self) -> dict[tuple[int, ...], int]:
        per_block: dict[tuple[int, ...], int] = defaultdict(int)
        for (block, _thread), n in self.writes.items():
            per_block[block] += n
        return per_block


def _current_thread_key() -> ThreadKey:
    t = threading.current_thread()
    block, thread = getattr(t, "blockIdx", None), getattr(t, "threadIdx", None)
    if block is None:
        return ((-1,), (-1,))   # host code touching the array outside a launch
    return (tuple(block), tuple(thread))


class TracedArray:
    """A numpy array seen through element accesses only, each one counted for the calling thread."""

    def __init__(self, name: str, data: np.ndarray, log: AccessLog, offset: tuple[int, ...] = ()):
        self._name, self._data, self._log, self._offset = name, data, log, offset

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape[len(self._offset):]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def dtype(self):
        return self._data.dtype

    def __len__(self) -> int:
        return self.shape[0]

    def _index(self, idx, action: str) -> tuple[int, ...]:
        idx = idx if isinstance(idx, tuple) else (idx,)
        for i in idx:
            if not isinstance(i, (int, np.integer)):
                raise TypeError(f"{action} {self._name}[{_fmt(idx)}]: puzzle kernels index global arrays "
                                f"with integers only, not {type(i).__name__}")
        full = self._offset + tuple(int(i) for i in idx)
        if len(full) > self._data.ndim or any(not 0 <= i < n for i, n in zip(full, self._data.shape)):
            raise IndexError(f"out-of-bounds {action} {self._name}[{_fmt(full)}] "
                             f"(shape {self._data.shape})")
        return full

    def __getitem__(self, idx):
        full = self._index(idx, "read of")
        if len(full) < self._data.ndim:   # a[i][j]: a row view, the access is counted at a[i][j]
            return TracedArray(self._name, self._data, self._log, full)
        self._log.record("reads")
        return self._data[full]

    def __setitem__(self, idx, value) -> None:
        full = self._index(idx, "write to")
        if len(full) < self._data.ndim:
            raise TypeError(f"write to {self._name}[{_fmt(full)}]: write one element at a time")
        self._log.record("writes")
        self._data[full] = value


def _fmt(idx: tuple) -> str:
    return ", ".join(str(i) for i in idx)
