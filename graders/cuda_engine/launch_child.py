"""Child handler (run by `graders.sandbox.run.run_child` under a tool): launch one kernel once, or several.

The request names the spec, the kernel, its geometry, the source and a shape; the child compiles the source,
makes inputs and a guarded output at that shape, launches once and waits. A request of ``launches`` (a list of
such requests, all of one submission) launches each in turn, each on memory of its own (the previous launch's is
given back to the driver first), and answers each one's outcome: its shape, or the error it raised (the next one
is still tried). The tool wrapped around this process watches the launches: compute-sanitizer
(`graders.cuda_engine.sanitizer`) or Nsight Compute (`graders.cuda_engine.counters`).
"""
from __future__ import annotations

import gc

from graders.cuda_engine.child import Harness
from graders.cuda_engine.problems import Shape, problem
from graders.cuda_engine.spec import Geometry, KernelSpec, load_spec, resolve_geometry


def launch_once(kernel: KernelSpec, geometry: Geometry, source: str, shape: Shape, *, seed: int,
                memory_fraction: float = 0.25, lineinfo: bool = False) -> None:
    """Compile ``source`` as ``kernel`` with ``geometry`` (and, with ``lineinfo``, its source lines, for the tool's
    report) and launch it once at ``shape``, on fresh inputs into a guarded output, and wait for it (also what
    `workshop.ncu` profiles)."""
    harness = Harness(problem(kernel.kind), geometry, memory_fraction, seed, kernel.launch)
    harness.load(source, kernel.function, lineinfo)
    inputs = harness.inputs(shape)
    _, out = harness.output(shape)
    harness.synchronize()
    harness.launch(out, inputs, shape)
    harness.synchronize()


def handle(request: dict) -> dict:
    if "launches" in request:
        return {"launches": [_outcome(launch) for launch in request["launches"]]}
    return {"launched": _launch(request)}


def _launch(request: dict) -> list[int]:
    kernel = load_spec(request["spec_path"]).kernel(request["kernel_id"])
    geometry = resolve_geometry(kernel, request.get("block"), request.get("tile"), request.get("params"))
    shape = tuple(request["shape"])
    launch_once(kernel, geometry, request["source"], shape, seed=int(request["seed"]),
                memory_fraction=float(request.get("memory_fraction", 0.25)), lineinfo=bool(request.get("lineinfo")))
    return list(shape)


def _outcome(request: dict) -> dict:
    """One launch of a ``launches`` request: ``{"launched": shape}`` or ``{"error": ...}``; then its memory goes back
    to the driver, so that the next launch's is freshly allocated (initcheck knows fresh memory as unwritten)."""
    import torch
    try:
        return {"launched": _launch(request)}
    except Exception as exc:   # this launch's failure; the others are still launched and reported
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        gc.collect()
        torch.cuda.empty_cache()
