"""Child handler (run by `graders.sandbox.run.run_child`): check and time one ``ModelNew`` against its problem's
reference ``Model`` (``mode`` ``"check"`` or ``"grade"``), or time the reference alone, eager and compiled
(``"baseline"``: no submission in the process), in one sandboxed process that serves one request (the module defines
no ``reusable``); on the CPU that process is a fork of one that imported torch and Triton once
(`graders.sandbox.child`'s ``--fork-serve``).

Order of work, each step what keeps a ``ModelNew`` from forging its result or its time:

1. The reference ``Model`` is built from the problem's module text (the track's ``problem.py``), its globals set
   to the request's sizes. The submission's cell is checked against the allowlist again
   (`graders.model_engine.source.source_problems`) and run in a namespace of its own whose builtins are
   `graders.model_engine.source.BUILTINS` and an ``__import__`` of the allowed modules only: the problem's
   names (``Model``, ``get_inputs``) are not in it, and nothing of it is ever read back but ``ModelNew``.
   Both models are built from the same init inputs, each after ``torch.manual_seed`` of the same seed.
2. Correctness, `Judge.trial`, for each of ``trials``: inputs drawn on the device from the trial's own seed
   (derived from the hidden seed) only after the previous trial was checked; ``ModelNew`` gets clones, and its
   output must be exactly a ``torch.Tensor`` (no subclass), strided, on the device, sharing no storage with its
   inputs; it is copied out to host memory (numpy) as soon as the call returns; the clones it got must still hold
   the inputs' bytes; only then does the reference run, on clones of its own, so no reference output exists while
   the submission's code runs; the comparison is numpy's, on the two copies.
3. Timing, `Judge.time`: ``timed_runs`` calls of the submission, each on fresh inputs; the eager reference and
   (where ``compile``) ``torch.compile`` of it are timed the same way, each output checked too, by a
   ``"baseline"`` child, which runs no submission (`graders.model_engine.grade.baseline`: once per grading
   process). On a GPU: the L2 cache flushed, the whole device synchronised, a CUDA event, the call, the output's
   type checked, the whole device synchronised again (work on any stream is inside the time), the end event. On
   the CPU (tests only: CPU times say nothing about a GPU kernel) ``time.perf_counter_ns`` around the call; eager
   CPU operators return when their result is written. Every timed output of the submission is copied out after its timer
   stopped and checked against the reference on the same inputs before the next call (the reference runs after
   the submission's call, on clones of its own), so a call that is fast because it is wrong is found. The
   medians give the speed-ups (reference / submission, the parent's division), KernelBench's fast_p inputs.

The answer's ``phases`` has the seconds of each phase that ran (`Clock`), for the TA's autograde log and
`benchmarks.grading_time`: ``setup`` (torch imported, the reference built on the device: CUDA's start), ``load`` (the
cell run, the model built), ``trials`` (a Triton kernel's first compile is in its first call), ``timing`` (the
submission's timed calls and their checks); a baseline child's ``setup``, ``eager``, and ``compile``
(torch.compile's compile, in its warm-up calls, and its timed calls).
"""
from __future__ import annotations

import builtins
import hashlib
import importlib.util
import linecache
import statistics
import time
from pathlib import Path

from graders.model_engine.cuda_kernels import NoGPU
from graders.model_engine.source import ALLOWED_IMPORTS, BUILTINS, CLASS_NAME, CUDA_KERNELS, source_problems
from graders.model_engine.spec import ModelProblem, load_model_spec
from graders.result import Status

SOURCE_FILE = "<your ModelNew's cell>"
FORK_PRELOAD = ("torch", "triton")   # imported once by a fork server (`graders.sandbox.child`): grading on the CPU
WARMUP_CALLS = 2
COMPARED_AT_ONCE = 1 << 18   # values `Judge.far` compares at a time: 2 MiB of float64 a temporary


class Failed(Exception):
    """The submission failed; ``status`` and the message say how."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


def _restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
    launcher = name == CUDA_KERNELS and tuple(fromlist or ()) == ("cuda_kernel",)
    if level or not (name in ALLOWED_IMPORTS or launcher):
        raise ImportError(f"{name} is not importable in a ModelNew's cell")
    return builtins.__import__(name, globals, locals, fromlist, level)


def load_submission(source: str) -> type:
    """``ModelNew`` of ``source``, run in its own namespace (see the module's docstring)."""
    problems = source_problems(source)
    if problems:
        raise Failed(Status.REFUSED, f"{CLASS_NAME}'s cell holds what the grader does not run: "
                                     + "; ".join(problems[:3]))
    allowed = {name: getattr(builtins, name) for name in BUILTINS if hasattr(builtins, name)}
    namespace = {"__name__": "submitted_model", "__builtins__": allowed | {
        "__build_class__": builtins.__build_class__, "__import__": _restricted_import}}
    linecache.cache[SOURCE_FILE] = (len(source), None, source.splitlines(True), SOURCE_FILE)   # read by Triton
    try:
        exec(compile(source, SOURCE_FILE, "exec", dont_inherit=True), namespace)
    except Exception as exc:
        raise Failed(Status.COMPILE_ERROR, f"running your cell raised {type(exc).__name__}: {exc}") from None
    found = namespace.get(CLASS_NAME)
    if not isinstance(found, type):
        raise Failed(Status.COMPILE_ERROR, f"your cell defines no class {CLASS_NAME}")
    return found


def problem_namespace(text: str, sizes: dict) -> dict:
    """The problem's module (``Model``, ``get_inputs``, ``get_init_inputs``) with ``sizes`` set as its globals."""
    namespace = {"__name__": "kernelbench_problem"}
    exec(compile(text, "<the problem's module>", "exec", dont_inherit=True), namespace)
    unknown = set(sizes) - set(namespace)
    if unknown:
        raise ValueError(f"the spec's sizes name no global of the problem: {sorted(unknown)}")
    namespace.update(sizes)
    return namespace


def problem_text(path: Path, problem_id: str) -> str:
    """The module text of problem ``problem_id``: ``SOURCES[problem_id]`` of the track's ``problem.py``."""
    spec = importlib.util.spec_from_file_location("model_track_problems", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SOURCES[problem_id]


def trial_seed(seed: int, trial: int) -> int:
    """The seed of one trial's (or timed call's) inputs: drawn from the hidden seed, not guessable from the trial."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{trial}".encode()).digest()[:7], "little")


class Judge:
    """The trusted side of the child: it draws inputs, runs and times both models and compares their outputs."""

    def __init__(self, torch, problem: ModelProblem, namespace: dict, device: str, seed: int):
        import numpy
        self.torch, self.numpy, self.problem, self.device, self.seed = torch, numpy, problem, device, seed
        self.tensor_type, self.strided = torch.Tensor, torch.strided
        self.get_inputs = namespace["get_inputs"]
        self.init_inputs = namespace["get_init_inputs"]()
        self.cuda = device == "cuda"
        self.synchronize = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.event = torch.cuda.Event if self.cuda else None
        self.flush = None
        if self.cuda:
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
            self.flush = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
        torch.manual_seed(seed)
        self.reference = namespace["Model"](*self.init_inputs).to(device).eval()

    def build(self, model_class: type):
        torch = self.torch
        torch.manual_seed(self.seed)   # the same initial weights as the reference's
        try:
            model = model_class(*self.init_inputs)
        except Exception as exc:
            raise Failed(Status.COMPILE_ERROR, f"{CLASS_NAME}(*get_init_inputs()) raised "
                                               f"{type(exc).__name__}: {exc}") from None
        if not isinstance(model, torch.nn.Module):
            raise Failed(Status.COMPILE_ERROR, f"{CLASS_NAME} must be a torch.nn.Module")
        return model.to(self.device).eval()

    def inputs(self, n: int) -> list:
        """Call ``n``'s inputs (KernelBench's ``get_inputs`` after seeding), drawn on the device (its default
        device meanwhile: drawing hundreds of MiB on the host and copying them took seconds a call)."""
        torch = self.torch
        torch.manual_seed(trial_seed(self.seed, n))
        with torch.device(self.device):
            made = self.get_inputs()
        return [x.to(self.device) if isinstance(x, self.tensor_type) else x for x in made]

    @staticmethod
    def _clones(inputs: list) -> list:
        return [x.clone() if hasattr(x, "clone") else x for x in inputs]

    def _host(self, tensor):
        """A numpy copy of ``tensor``, read by the trusted side only."""
        return tensor.detach().to("cpu", copy=True).numpy()

    def _snapshots(self, inputs: list) -> list:
        """Each tensor input's bytes, copied to the host; any other input's repr."""
        numpy = self.numpy
        return [numpy.ascontiguousarray(self._host(x)).reshape(-1).view(numpy.uint8)
                if isinstance(x, self.tensor_type) else repr(x) for x in inputs]

    def _unchanged(self, before: list, after: list) -> bool:
        numpy = self.numpy
        return all(numpy.array_equal(b, a) if isinstance(b, numpy.ndarray) else b == a for b, a in zip(before, after))

    def _checked_output(self, out, given: list) -> None:
        """Refuses what is not a real dense output: a subclass, a sparse or lazy one, another device's, one that
        shares storage with an input."""
        if type(out) is not self.tensor_type:
            raise Failed(Status.INCORRECT, f"forward returned {type(out).__name__}; it must return a torch.Tensor "
                                           "(not a subclass, a tuple or a lazy result)")
        if out.layout != self.strided or out.device.type != self.device:
            raise Failed(Status.INCORRECT, f"forward returned a {out.layout} tensor on {out.device}; it must be "
                                           f"a dense (strided) tensor on {self.device}")
        start = out.untyped_storage().data_ptr()
        end = start + out.untyped_storage().nbytes()
        for x in given:
            if isinstance(x, self.tensor_type):
                other = x.untyped_storage().data_ptr()
                if other < end and start < other + x.untyped_storage().nbytes():
                    raise Failed(Status.INCORRECT, "forward returned a tensor that shares memory with its input; "
                                                   "it must write a new output")

    def expected(self, inputs: list):
        """The reference's output on clones of ``inputs``, copied to the host (the trusted model: whether it left its
        inputs as they were is not checked, nor its output's form)."""
        with self.torch.no_grad():
            return self._host(self.reference(*self._clones(inputs)))

    def call(self, model, inputs: list):
        """``model`` on clones of ``inputs``: (its output's host copy, whether it left the clones as they were)."""
        torch = self.torch
        given = self._clones(inputs)
        before = self._snapshots(given)
        with torch.no_grad():
            out = model(*given)
        self._checked_output(out, given)
        return self._host(out), self._unchanged(before, self._snapshots(given))

    def compare(self, got, want, label: str) -> None:
        numpy = self.numpy
        if got.shape != want.shape or got.dtype != want.dtype:
            raise Failed(Status.INCORRECT, f"{label}: the output is {got.dtype} {list(got.shape)}, expected "
                                           f"{want.dtype} {list(want.shape)}")
        bad = self.far(got, want)
        if bad.any():
            where = tuple(int(i) for i in numpy.unravel_index(int(numpy.flatnonzero(bad)[0]), got.shape))
            g, w = numpy.float64(got[where]), numpy.float64(want[where])
            raise Failed(Status.INCORRECT, f"{label}: out{list(where)} = {g:.6g}, expected {w:.6g} "
                                           f"(atol {self.problem.atol:g}, rtol {self.problem.rtol:g}; "
                                           f"{int(bad.sum())} of {bad.size} values differ)")

    def far(self, got, want):
        """Which values of ``got`` are not close to ``want``'s, flat: numpy.isclose's own test (``equal_nan``) in
        float64, `COMPARED_AT_ONCE` values at a time (its temporaries of a whole output of hundreds of MiB took
        seconds a comparison; chunks that fit a core's cache compare 50 M values in about 0.2 s, a quarter of the
        time 64 Ki-value chunks took)."""
        numpy, rtol, atol = self.numpy, self.problem.rtol, self.problem.atol
        got, want = got.reshape(-1), want.reshape(-1)
        bad = numpy.empty(got.size, dtype=bool)
        for start in range(0, got.size, COMPARED_AT_ONCE):
            x = got[start:start + COMPARED_AT_ONCE].astype(numpy.float64)
            y = want[start:start + COMPARED_AT_ONCE].astype(numpy.float64)
            with numpy.errstate(invalid="ignore"):
                close = ((numpy.abs(x - y) <= atol + rtol * numpy.abs(y)) & numpy.isfinite(y) | (x == y)
                         | numpy.isnan(x) & numpy.isnan(y))
            numpy.logical_not(close, out=bad[start:start + COMPARED_AT_ONCE])
        return bad

    def trial(self, model, n: int) -> None:
        """One correctness trial on fresh inputs (see the module's docstring, step 2)."""
        inputs = self.inputs(n)
        try:
            got, untouched = self.call(model, inputs)
        except Failed:
            raise
        except NoGPU as exc:
            status = Status.KERNEL_ERROR if self.cuda else Status.NO_GPU   # on a GPU: a CPU tensor handed to it
            raise Failed(status, f"trial {n + 1}: {exc}") from None
        except Exception as exc:   # the submission's own failure, not the grader's
            raise Failed(Status.KERNEL_ERROR, f"trial {n + 1}: forward raised {type(exc).__name__}: {exc}") from None
        if not untouched:
            raise Failed(Status.INCORRECT, f"trial {n + 1}: forward changed its inputs in place")
        self.compare(got, self.expected(inputs), f"trial {n + 1}")

    def _timed_call(self, model, inputs: list) -> tuple[float, object]:
        torch = self.torch
        given = self._clones(inputs)
        if self.cuda:
            self.flush.zero_()
            start, end = self.event(enable_timing=True), self.event(enable_timing=True)
            self.synchronize()
            start.record()
            with torch.no_grad():
                out = model(*given)
            self._checked_output(out, given)
            self.synchronize()   # the whole device: work left on any stream is inside the time
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3, out
        begin = time.perf_counter_ns()
        with torch.no_grad():
            out = model(*given)
        self._checked_output(out, given)
        return (time.perf_counter_ns() - begin) / 1e9, out

    def time(self, model, first: int, runs: int, check: bool) -> dict:
        """Median seconds of ``runs`` calls of ``model``, each on fresh inputs (calls ``first``, ``first + 1``, ...);
        with ``check``, each timed output is checked against the reference on the same inputs once its timer has
        stopped, before the next call: no output is kept across calls, so a checked model is timed in a process
        like an unchecked one's (kept host copies grew it call by call, and slowed the calls after them)."""
        for n in range(WARMUP_CALLS):
            self._timed_call(model, self.inputs(first + n))
        seconds = []
        for n in range(runs):
            inputs = self.inputs(first + WARMUP_CALLS + n)
            taken, out = self._timed_call(model, inputs)
            seconds.append(taken)
            got = self._host(out) if check else None
            del out
            if check:
                self.compare(got, self.expected(inputs), f"timed call {n + 1}")
            del got
        return {"median_s": statistics.median(seconds), "min_s": min(seconds), "runs": runs}


class Clock:
    """Seconds of each phase into ``phases`` (name -> seconds, 3 decimals): `begin` ends the running phase and
    starts the next; `end` ends the running one (a failed phase keeps the seconds it ran)."""

    def __init__(self, phases: dict, first: str):
        self.phases, self.running, self._since = phases, first, time.monotonic()

    def begin(self, name: str) -> None:
        self.end()
        self.running = name

    def end(self) -> None:
        now = time.monotonic()
        if self.running:
            self.phases[self.running] = round(now - self._since, 3)
        self.running, self._since = "", now


def handle(request: dict) -> dict:
    phases: dict = {}
    clock = Clock(phases, "setup")
    spec = load_model_spec(request["spec_path"])
    problem = spec.problem(request["problem_id"])
    seed = int(request["seed"])
    device = request.get("device", "cuda")
    result: dict = {"problem_id": problem.id, "seed": seed, "device": device, "phases": phases}
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        return result | {"status": Status.NO_GPU, "message": "the grading process found no CUDA GPU"}
    namespace = problem_namespace(problem_text(spec.path.parent / "problem.py", problem.id), request["sizes"])
    judge = Judge(torch, problem, namespace, device, seed)
    trials, runs = int(request.get("trials", spec.trials)), int(request.get("timed_runs", spec.timed_runs))
    if request.get("mode") == "baseline":
        return result | {"status": Status.OK, "message": "",
                         "timing": baseline(judge, clock, runs, bool(request.get("compile")))}
    try:
        clock.begin("load")
        model = judge.build(load_submission(request["source"]))
        clock.begin("trials")
        for n in range(trials):
            judge.trial(model, n)
        clock.end()
        result["trials"] = trials
        if request.get("mode") == "check":
            return result | {"status": Status.OK, "message": ""}
        clock.begin("timing")
        try:
            timing = {"submission": judge.time(model, trials, runs, check=True)}
        except Failed:
            raise
        except Exception as exc:
            raise Failed(Status.KERNEL_ERROR, f"while timed: {type(exc).__name__}: {exc}") from None
        clock.end()
    except Failed as exc:
        clock.end()
        return result | {"status": exc.status, "message": str(exc)}
    return result | {"status": Status.OK, "message": "", "timing": timing}


def baseline(judge: Judge, clock: Clock, runs: int, compiled: bool) -> dict:
    """The reference's times: ``eager``, and with ``compiled`` ``compile`` (``torch.compile`` of it), or
    ``compile_error`` where torch.compile fails (the baseline is missing, nothing is wrong). Each is timed exactly as
    a submission is, every timed output checked before the next call: the check's host work slows the call after
    it, its host part most (``torch.compile``'s relu call took 0.39 ms that way against 0.22 ms back to back), so
    a baseline timed without it would be measured under other conditions than the submission it is divided by."""
    clock.begin("eager")
    timing = {"eager": judge.time(judge.reference, 0, runs, check=True)}
    if compiled:
        clock.begin("compile")
        try:
            timing["compile"] = judge.time(judge.torch.compile(judge.reference), 0, runs, check=True)
        except Exception as exc:
            timing["compile_error"] = f"{type(exc).__name__}: {exc}"
    clock.end()
    return timing
