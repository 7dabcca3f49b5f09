"""Child handler (run by `graders.sandbox.run.run_child` in a GPU sandbox): time every operation of a roofline
track, and the worker's two launch figures, on this GPU: one PyTorch operation on a one-element tensor (a launch
alone) and `STREAM_LAUNCHES` of them in a row (each further one adds a launch in a stream).

No student code runs here: the operations are the track's own (``problem.py``). What is timed is what a line of
eager PyTorch costs: `EagerTimer` flushes L2 (writes a buffer twice its size), waits until the GPU is idle, then
records a CUDA event, runs the operation's code from Python, records a second event and waits for it. The time
between the events covers the host's work to launch each kernel (the GPU waits for it) and every kernel's run.
Before each timed run the inputs are drawn afresh (``normal_``, untimed). The operations and the launch overhead
are sampled in turn, round after round (`graders.cuda_engine.timing.run_until_stable`), after a warm-up that
takes the GPU off its idle clocks; the median of each is reported. FP32 matmuls run in FP32 (TF32 off).
"""
from __future__ import annotations

import time
from typing import Callable

from graders import tracks
from graders.cuda_engine.timing import Subject, Timer, environment, l2_cache_bytes
from graders.roofline_engine.operations import timed_function

LAUNCH = "launch"   # the subject that measures a launch alone: x.add_(1.0) on one element
STREAM = "stream"   # STREAM_LAUNCHES of those in a row: the first alone, the rest in a stream of launches
STREAM_LAUNCHES = 20
WARMUP_S = 0.5
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


class EagerTimer(Timer):
    """Times a subject as eager PyTorch runs it: from an idle GPU with L2 flushed to its last kernel's end."""

    def __init__(self, subjects: dict[str, Subject], *, warmup_s: float = WARMUP_S):
        import torch
        super().__init__(subjects)
        self.torch = torch
        self.l2_bytes = l2_cache_bytes()
        self.flush_buffer = torch.empty(2 * self.l2_bytes // 4, dtype=torch.float32, device="cuda")
        self.flushes = 0
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        end = time.monotonic() + warmup_s
        while True:
            for name in self.subjects:
                self.sample(name)
            if time.monotonic() >= end:
                break

    def timed(self, name: str, run: Callable[[], None]) -> float:
        self.flushes += 1
        self.flush_buffer.fill_(float(self.flushes))
        self.torch.cuda.synchronize()
        self.start.record()
        run()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) / 1e3


def subjects(operations, torch, device: str = "cuda") -> dict[str, Subject]:
    """A subject per operation (its inputs on ``device``, drawn afresh before every run), `LAUNCH` and `STREAM`."""
    namespace = {"torch": torch, "F": torch.nn.functional}
    found = {}
    for op in operations:
        tensors = [torch.empty(t.shape, dtype=getattr(torch, TORCH_DTYPES[t.dtype]), device=device)
                   for t in op.inputs.values()]
        run = timed_function(op, namespace)
        found[op.id] = Subject(run=lambda run=run, tensors=tensors: run(*tensors),
                               prepare=lambda tensors=tensors: [t.normal_() for t in tensors])
    one = torch.zeros(1, device=device)
    found[LAUNCH] = Subject(run=lambda: one.add_(1.0), prepare=one.zero_)

    def stream() -> None:
        for _ in range(STREAM_LAUNCHES):
            one.add_(1.0)

    found[STREAM] = Subject(run=stream, prepare=one.zero_)
    return found


def launch_in_stream_s(alone_s: float, stream_s: float) -> float:
    """What each further launch in a stream adds: the `STREAM` subject's time beyond one launch alone, per launch."""
    return max(stream_s - alone_s, 0.0) / (STREAM_LAUNCHES - 1)


def handle(request: dict) -> dict:
    """Time every operation of ``request["assignment"]``: ``{"launch_overhead_s", "launch_in_stream_s",
    "operations": {id: Stats}, "environment"}`` (`graders.cuda_engine.timing.Stats` as dicts; the environment with
    the GPU's peaks)."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    operations = tracks.get(request["assignment"]).problem_module().OPERATIONS
    timer = EagerTimer(subjects(operations, torch))
    stats = timer.measure(request["budget_s"], rse_target=request.get("rse_target", 0.01),
                          min_samples=request.get("min_samples", 50), min_time_s=request.get("min_time_s", 2.0))
    alone = stats[LAUNCH].median_s
    return {"launch_overhead_s": alone, "launch_in_stream_s": launch_in_stream_s(alone, stats[STREAM].median_s),
            "operations": {op.id: stats[op.id].as_dict() for op in operations},
            "environment": environment()}
