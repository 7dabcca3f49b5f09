"""CPU previews (`graders.cuda_engine.preview.run_preview`) of many kernels at once, on every core: g++ builds take
most of the time, and the builds are kept (the preview's cache), so a source built by one test module is not built
again by another."""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from graders.cuda_engine.preview import Preview, preview_shapes, run_preview, toolchain
from graders.cuda_engine.problems import Shape, problem
from graders.cuda_engine.spec import Geometry, KernelSpec

HAVE_GXX = sys.platform.startswith("linux") and toolchain() is not None   # what the preview runs on


@dataclass(frozen=True)
class Job:
    kernel: KernelSpec
    source: Path
    geometry: Geometry | None = None          # the spec's
    shapes: tuple[Shape, ...] | None = None   # the check cell's (`preview_shapes`)
    time_limit_s: float = 10

    def run(self) -> Preview:
        geometry = self.geometry or self.kernel.geometry
        shapes = self.shapes or preview_shapes(self.kernel, problem(self.kernel.kind), geometry)
        return run_preview(self.kernel, geometry, self.source.read_text(), list(shapes),
                           time_limit_s=self.time_limit_s)


def run_all(jobs: dict[str, Job]) -> dict[str, Preview]:
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {key: pool.submit(job.run) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}
