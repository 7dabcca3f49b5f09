"""The record a GPU test leaves: what was measured, on which GPU, when, with which versions."""
from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
from importlib import metadata
from pathlib import Path

from graders.gpu import detect_gpu
from graders.cuda_engine.timing import versions

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def write_gpu_record(prefix: str, what: str, fields: dict, dists: tuple[str, ...] = ()) -> Path:
    """Write ``benchmarks/results/<prefix>-<date-time>.json`` (and a copy in $OUT, when set): ``what``, the
    GPU, the date, the versions (the grader's, and ``dists``'), then ``fields``. Returns its path."""
    gpu = detect_gpu()
    found = versions()
    for dist in dists:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    now = datetime.datetime.now(datetime.timezone.utc)
    record = {"what": what, "gpu": gpu.name if gpu else None, "date": now.isoformat(timespec="seconds"),
              "python": platform.python_version(), "versions": found, **fields}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{prefix}-{now:%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    if os.environ.get("OUT"):
        shutil.copy(path, os.environ["OUT"])
    print(json.dumps(record, indent=2))
    return path
