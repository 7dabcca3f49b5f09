"""GPU tests run only where a CUDA GPU is found (`graders.gpu.detect_gpu`, which has no side effects)."""
import pytest

from graders.gpu import detect_gpu


def pytest_collection_modifyitems(config, items):
    if detect_gpu() is not None:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run on a GPU worker with `pytest -m gpu`")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
