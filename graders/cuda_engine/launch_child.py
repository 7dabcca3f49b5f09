"""Child handler (run by `graders.sandbox.run.run_child` under a tool): launch one kernel once.

The request names the spec, the kernel, its geometry, the source and a shape; the child compiles the source,
makes inputs and a guarded output at that shape, launches once and waits. The tool wrapped around this
process watches the launch: compute-sanitizer (`graders.cuda_engine.sanitizer`) or Nsight Compute
(`graders.cuda_engine.counters`).
"""
from __future__ import annotations

from graders.cuda_engine.child import Harness
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import load_spec, resolve_geometry


def handle(request: dict) -> dict:
    kernel = load_spec(request["spec_path"]).kernel(request["kernel_id"])
    geometry = resolve_geometry(kernel, request.get("block"), request.get("tile"), request.get("params"))
    shape = tuple(request["shape"])
    harness = Harness(problem(kernel.kind), geometry, float(request.get("memory_fraction", 0.25)),
                      int(request["seed"]))
    harness.load(request["source"], kernel.function)
    inputs = harness.inputs(shape)
    _, out = harness.output(shape)
    harness.synchronize()
    harness.launch(out, inputs, shape)
    harness.synchronize()
    return {"launched": list(shape)}
