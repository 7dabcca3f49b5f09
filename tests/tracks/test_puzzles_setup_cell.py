"""The puzzles notebook's setup cell, run in a real Jupyter kernel as a student's JupyterLab runs it: without a
GPU it picks numba-cuda's simulator before numba.cuda is imported, says so, and a kernel launched by hand runs."""
from __future__ import annotations

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from graders import tracks

LAUNCH = """import numpy as np

@cuda.jit
def add_one(out, a):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < a.size:
        out[i] = a[i] + 1

a = np.arange(6.0)
out = np.zeros_like(a)
add_one[2, 4](out, a)
print(out.tolist())"""


def test_setup_cell_picks_the_simulator_without_a_gpu_and_a_kernel_launches_by_hand(monkeypatch):
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)   # a student's shell sets nothing
    monkeypatch.setenv("WORKSHOP_GPU", "0")                    # and has no GPU, also on a GPU worker
    source = nbformat.read(str(tracks.get("puzzles").notebook_path), as_version=4)
    setup = next(c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    nb = nbformat.v4.new_notebook(metadata=source.metadata, cells=[setup, new_code_cell(LAUNCH)])
    NotebookClient(nb, timeout=120).execute()
    said, launched = ("".join(o.get("text", "") for o in cell.outputs) for cell in nb.cells)
    assert said == "numba.cuda kernels run in numba-cuda's simulator on the CPU (NUMBA_ENABLE_CUDASIM=1).\n"
    assert launched == "[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n"
    assert setup.source.index('os.environ["NUMBA_ENABLE_CUDASIM"] = "1"') < setup.source.index("from numba import")
