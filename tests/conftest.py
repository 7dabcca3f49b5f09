"""Test set-up: without a GPU, kernels run in numba-cuda's simulator and `gpu` tests are skipped."""
from __future__ import annotations

import os

import pytest

from graders.gpu import detect_gpu

HAVE_GPU = detect_gpu() is not None
if not HAVE_GPU:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# Short limits keep the hang tests quick; the defaults (30 s a kernel, 120 s a cell) are for real grading.
os.environ.setdefault("WORKSHOP_KERNEL_TIMEOUT", "5")
os.environ.setdefault("WORKSHOP_CELL_TIMEOUT", "20")


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on a GPU worker)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
