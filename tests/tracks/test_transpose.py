"""The transpose track's own submissions used by the GPU tests compile (no GPU needed)."""
from __future__ import annotations

import pytest

from graders.cuda_engine.grade import check_compiles
from transpose_cells import slow_source


@pytest.mark.parametrize("kernel_id", ["tiled", "padded", "best"])
def test_the_slow_submission_compiles(kernel_id):
    assert check_compiles("transpose", kernel_id, slow_source(kernel_id))
