"""Global-array access counting in the simulator."""
import numpy as np
import pytest
from numba import cuda

from graders.numba_engine.traced_array import AccessLog, TracedArray, printing


@cuda.jit
def _copy_plus_neighbour(out, a):
    i = cuda.threadIdx.x
    if i < a.shape[0] - 1:
        out[i] = a[i] + a[i + 1]


def test_reads_and_writes_are_counted_per_thread():
    log = AccessLog()
    a = np.arange(4, dtype=np.float32)
    out = np.full(4, np.nan, dtype=np.float32)
    _copy_plus_neighbour[1, 4](TracedArray("out", out, log), TracedArray("a", a, log))
    assert out[:3].tolist() == [1, 3, 5]
    assert dict(log.reads) == {((0, 0, 0), (t, 0, 0)): 2 for t in range(3)}
    assert dict(log.writes) == {((0, 0, 0), (t, 0, 0)): 1 for t in range(3)}
    assert log.block_writes() == {(0, 0, 0): 3}


def test_negative_and_past_the_end_indices_are_out_of_bounds():
    arr = TracedArray("a", np.zeros((2, 3), np.float32), AccessLog())
    with pytest.raises(IndexError, match=r"out-of-bounds read of a\[-1, 0\]"):
        arr[-1, 0]
    with pytest.raises(IndexError, match=r"out-of-bounds write to a\[1, 3\]"):
        arr[1, 3] = 1.0


def test_row_view_counts_the_element_access_once():
    log = AccessLog()
    arr = TracedArray("a", np.arange(6, dtype=np.float32).reshape(2, 3), log)
    assert arr[1][2] == 5 and arr.shape == (2, 3) and arr[1].shape == (3,)
    assert sum(log.reads.values()) == 1


def test_accesses_while_printing_count_and_are_noted_apart():
    log = AccessLog()
    arr = TracedArray("a", np.arange(4, dtype=np.float32), log)
    arr[0]
    with printing():
        arr[1]
        with printing():    # a print inside a device function called inside a print
            arr[1] = 2.0
        arr[2]
    arr[3]
    host = ((-1,), (-1,))
    assert log.reads[host] == 4 and log.writes[host] == 1
    assert dict(log.printed) == {("reads", host): 2, ("writes", host): 1}
