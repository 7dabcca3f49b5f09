"""Where a submission was graded, recorded in its autograded notebook for `workshop.export`.

The hidden tests' reports (in each graded cell's output) give a kernel's time, throughput and ratio, but not
the GPU they ran on: `RecordGradedOn`, after the trusted grades, writes ``metadata.workshop.graded_on`` =
``{"target": "gpu" | "sim", "gpu": <the worker's GPU name> | None, "at": <when, ISO 8601 UTC>}``.
"""
from __future__ import annotations

import datetime

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from graders import tracks
from graders.gpu import detect_gpu

KEY = "workshop"


def graded_on(assignment: str) -> dict:
    """Where ``assignment``'s kernels run on this machine: CUDA tracks on the GPU, numba ones on their target."""
    track = tracks.find(assignment)
    if track is not None and track.engine == "numba":
        from graders.numba_engine.grade import target
        where = target()
    else:
        where = "gpu"
    gpu = detect_gpu() if where == "gpu" else None
    return {"target": where, "gpu": gpu.name if gpu else None,
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


class RecordGradedOn(NbGraderPreprocessor):
    """Writes `graded_on` into the autograded notebook's metadata."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        nb.metadata.setdefault(KEY, {})["graded_on"] = graded_on(resources["nbgrader"]["assignment"])
        return nb, resources
