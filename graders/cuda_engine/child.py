"""Child handler (run by `graders.sandbox.run.run_child`): check and time one student kernel on the GPU.

The child owns everything the measurement depends on: it compiles the source it was sent (a string),
allocates inputs and outputs (torch CUDA tensors, under a GPU-memory cap), launches the kernel through
cuda.core on its own stream, and times it and the baseline with its own timer. Nothing in the notebook that
asked for the grade can reach this process.

Phases (`check_and_time`), each stopping at the first failure:
1. compile for this GPU's architecture (`graders.cuda_engine.compile`);
2. correctness at every ``check_shapes`` shape, on random inputs (every input of the child is drawn from
   the request's ``seed``, which the answer repeats), into outputs poisoned with NaN and fenced by canary
   guard regions (an out-of-bounds write damages a guard and is reported as such); a correct output's
   errors are recorded where the problem measures them (``Problem.accuracy``);
3. timing at ``perf_shape`` (`graders.cuda_engine.timing`): the problem's baseline (a device-to-device copy
   of the same bytes for copy/transpose) and the kernel, interleaved, one launch per sample. Before every
   timed launch the inputs are drawn afresh and the output is poisoned; after it the output is checked
   against the reference and its guards are checked. A kernel that remembers results, replays them or skips
   work on some launches fails here. A median time below what the problem's hardware ceiling allows
   (``Problem.roof``: the bytes at the memory's peak bandwidth, or the FLOPs at the FP32 peak) is not
   credited: status ``implausible``, correctness points only. Where the problem has an instruction probe
   (``Problem.instruction_probe``: back-to-back mma.sync), its rate is measured after the timing and reported
   beside the kernel's, not scored;
4. correctness again on fresh inputs at every shape *after* timing.
A kernel whose SASS misses its problem's requirements (`Problem.sass_requirements`: no tensor cores in an
FP32 GEMM) or its spec's (``sass_requirements``: HGMMA in a wgmma step) is still checked and timed, then gets
status ``unmet``: correctness points only. A kernel whose spec asks for sm_90a, dynamic shared memory, clusters or
tensor maps is launched through ``cuLaunchKernelEx`` (`graders.cuda_engine.extended_launch`).
A CUDA error (an illegal address, say) ends the child with status ``crashed``; the context is lost after
one. A checked launch still running `Harness.finish_launch`'s limit after it was made (the request's
``launch_timeout_s``) is hung: status ``timeout`` at once, and the child exits without its teardown, which could
wait on that kernel (the answer's ``exit_at_once``, `graders.sandbox.child`). A child may grade the next
kernel of the same submission (`reusable`, `graders.sandbox.session`) only after a grading whose kernel never ran
or ran right everywhere; after anything else the next kernel gets a fresh process.

Everything but the CUDA calls lives in `Bench` and `check_and_time`, which run on any torch device: the CPU
tests drive them with CPU tensors, Python "kernels" and a stand-in timer. `Harness` is the GPU bench.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time

import numpy as np

try:
    from cuda.core import Device, LaunchConfig, launch
except ImportError:  # cuda.core before 0.4
    from cuda.core.experimental import Device, LaunchConfig, launch

from graders.cuda_engine import extended_launch
from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.extended_launch import LaunchFeatures, compile_arch
from graders.cuda_engine.problems import InstructionProbe, Problem, Shape, problem
from graders.cuda_engine.spec import Geometry, KernelSpec, load_spec, resolve_geometry
from graders.cuda_engine.timing import Subject
from graders.result import Status
from graders.settings import DEFAULT_LAUNCH_TIMEOUT_S


class TimedLaunchFailed(Exception):
    """A timed launch wrote outside its output or gave a wrong result; ``status`` says which."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


class LaunchHung(Exception):
    """A checked launch was still running ``limit_s`` seconds after it was made (`Bench.finish_launch`)."""

    def __init__(self, limit_s: float, shape: str):
        super().__init__(f"your kernel did not finish within {limit_s:g} s of its launch at shape {shape} (an "
                         "endless loop? a __syncthreads() or a barrier wait that not every thread reaches?)")

    def answer(self) -> dict:
        """The grading's answer: ``timeout``, and the child leaves with it (``exit_at_once``)."""
        return {"status": Status.TIMEOUT, "message": str(self), "exit_at_once": True}


GUARD_ELEMENTS = 1 << 18        # 1 MiB of canaries before and after every output
CANARY = 0x7FA5A5A5             # a signalling-NaN bit pattern no correct kernel writes
# the instruction probe's launch (`Harness.instruction_ceiling`): 32 warps an SM, each PROBE_ITERATIONS deep
PROBE_BLOCKS_PER_SM, PROBE_THREADS, PROBE_ITERATIONS, PROBE_LAUNCHES = 4, 256, 2048, 5


class Bench:
    """One kernel and the buffers to run it on, on torch device ``device``: inputs, guarded outputs, the
    check against the reference, and the timing sets.

    Subclasses say how to `load`, `launch` and time (`timer`) the kernel; `enqueue`, `synchronize`,
    `release` and `clocks` default to a device that finishes work as it is asked (the CPU).
    """

    device = "cpu"

    def __init__(self, problem: Problem, geometry: Geometry, seed: int):
        import torch
        self.torch = torch
        self.problem = problem
        self.geometry = geometry
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def load(self, source: str, function: str) -> dict:
        """Make ``function`` of ``source`` the kernel; what it compiled to. Raises `CompileError`."""
        raise NotImplementedError

    def launch(self, out, inputs: list, shape: Shape) -> None:
        raise NotImplementedError

    def sass_failures(self, function: str, *extra: str) -> list[str]:
        """Why the loaded kernel misses its problem's SASS requirements (`Problem.sass_requirements`) and the
        ``extra`` ones of its spec."""
        return []

    def timer(self, subjects: dict):
        """A `graders.cuda_engine.timing.Timer` of ``subjects`` (name -> `timing.Subject`)."""
        raise NotImplementedError

    def peaks(self) -> dict[str, float]:
        """The device's hardware ceilings by `Problem.roof` name (`graders.cuda_engine.timing.peaks`)."""
        return {}

    def enqueue(self):
        """A context in which torch work goes where the kernel runs."""
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        """Wait until everything launched so far has finished."""

    def finish_launch(self, shape: str) -> None:
        """Wait for the kernel just launched at ``shape`` (its label); `LaunchHung` where it may never finish."""
        self.synchronize()

    def release(self) -> None:
        """Give cached memory back between phases."""

    def clocks(self) -> dict:
        return {}

    def inputs(self, shape: Shape) -> list:
        with self.enqueue():
            return self.problem.make_inputs(shape, self.generator)

    def output(self, shape: Shape):
        """A guarded output: (whole buffer, the view the kernel writes), body NaN, guards canaries."""
        torch = self.torch
        n = math.prod(self.problem.out_shape(shape))
        with self.enqueue():
            buffer = torch.empty(n + 2 * GUARD_ELEMENTS, dtype=torch.float32, device=self.device)
            buffer.view(torch.int32).fill_(CANARY)
            body = buffer[GUARD_ELEMENTS:GUARD_ELEMENTS + n]
            body.fill_(float("nan"))
        return buffer, body.view(self.problem.out_shape(shape))

    def check(self, shape: Shape) -> dict:
        """Run once on fresh inputs and compare with the reference; a dict with ok and message."""
        inputs = self.inputs(shape)
        buffer, out = self.output(shape)
        self.synchronize()
        label = "x".join(map(str, shape))
        self.launch(out, inputs, shape)
        self.finish_launch(label)
        damage = guard_damage(buffer)
        if damage:
            return {"shape": list(shape), "ok": False, "status": Status.OOB_WRITE,
                    "message": f"at shape {label} your kernel wrote outside its output: {damage}"}
        with self.enqueue():
            expected = self.problem.reference(inputs)
        self.synchronize()
        wrong = verdict(self.problem, out, expected)
        found = {"shape": list(shape), "ok": not wrong, "status": Status.INCORRECT if wrong else Status.OK,
                 "message": f"at shape {label} ({', '.join(self.problem.shape_names)}): {wrong}" if wrong else ""}
        if self.problem.accuracy and not wrong:
            found["accuracy"] = self.problem.accuracy(out, expected)
        return found

    def time(self, shape: Shape, budget_s: float) -> dict:
        """Time the kernel against the baseline at ``shape``, every timed launch on fresh inputs and checked.
        Raises `TimedLaunchFailed` at the first timed launch that goes wrong."""
        problem = self.problem
        buffer, out = self.output(shape)
        current = {"inputs": self.inputs(shape), "launches": 0}
        label = "x".join(map(str, shape))

        def fresh() -> None:
            current["inputs"] = self.inputs(shape)
            with self.enqueue():
                out.fill_(float("nan"))

        def verify() -> None:
            current["launches"] += 1
            damage = guard_damage(buffer)
            if damage:
                raise TimedLaunchFailed(Status.OOB_WRITE, f"while timed, your kernel wrote outside its output: "
                                        f"{damage}")
            with self.enqueue():
                expected = problem.reference(current["inputs"])
            self.synchronize()
            wrong = verdict(problem, out, expected)
            if wrong:
                raise TimedLaunchFailed(Status.INCORRECT, f"timed launch {current['launches']} (fresh inputs at "
                                        f"shape {label}) gave wrong results: every launch must do all its work "
                                        f"on the inputs it is given, none may reuse an earlier result or skip "
                                        f"work. {wrong}")

        timer = self.timer({
            "baseline": Subject(lambda: problem.baseline(out, current["inputs"]), prepare=fresh),
            "kernel": Subject(lambda: self.launch(out, current["inputs"], shape), prepare=fresh, verify=verify),
        })
        stats = timer.measure(budget_s)
        work = problem.work(shape)
        base, kern = stats["baseline"], stats["kernel"]
        found = {
            "shape": list(shape), "verified_launches": kern.samples, "l2_bytes": timer.l2_bytes,
            "baseline": base.as_dict() | {"throughput": work / base.median_s, "name": problem.baseline_name},
            "kernel": kern.as_dict() | {"throughput": work / kern.median_s},
            "work_unit": problem.work_unit, "ratio": base.median_s / kern.median_s,
            "ceiling": self.ceiling(),
        }
        if problem.instruction_probe:
            found["instruction_ceiling"] = self.instruction_ceiling(problem.instruction_probe)
        return found

    def instruction_ceiling(self, probe: InstructionProbe) -> dict:
        """``probe``'s name and throughput on this device (`Problem.instruction_probe`); {} where it cannot run."""
        return {}

    def ceiling(self) -> dict:
        """The problem's hardware ceiling on this device: its name and throughput, {} when none is known."""
        peak = self.peaks().get(self.problem.roof or "")
        return {"roof": self.problem.roof, "throughput": peak} if peak else {}


def implausible(timing: dict) -> str:
    """'' unless the kernel's median throughput is above its hardware ceiling; then why it is not credited."""
    ceiling, kernel = timing.get("ceiling") or {}, timing["kernel"]
    if not ceiling or kernel["throughput"] <= ceiling["throughput"]:
        return ""
    what = {"dram": "the memory's peak bandwidth", "fp32": "the FP32 pipes' peak rate"}.get(ceiling["roof"],
                                                                                           ceiling["roof"])
    unit = timing["work_unit"]
    return (f"your kernel's median time, {kernel['median_s'] * 1e3:.4g} ms, means "
            f"{kernel['throughput'] / 1e9:.0f} G{unit}/s, above {what} on this GPU "
            f"({ceiling['throughput'] / 1e9:.0f} G{unit}/s): no kernel that does the work is that fast, so its "
            f"speed is not credited (tensor cores in an FP32 step, or work done outside the timed launch?)")


class Harness(Bench):
    """The grading bench: GPU 0, one cuda.core stream, one NVRTC-compiled kernel."""

    device = "cuda"
    features = LaunchFeatures()   # the spec's launch keys (`graders.cuda_engine.extended_launch`); none by default

    def __init__(self, problem: Problem, geometry: Geometry, memory_fraction: float, seed: int,
                 features: LaunchFeatures = LaunchFeatures(), launch_timeout_s: float = DEFAULT_LAUNCH_TIMEOUT_S):
        import torch
        self.features = features
        self.launch_timeout_s = launch_timeout_s
        torch.cuda.set_device(0)
        torch.cuda.init()
        torch.cuda.set_per_process_memory_fraction(memory_fraction)
        self.cuda_device = Device(0)
        self.cuda_device.set_current()
        self.stream = self.cuda_device.create_stream()
        self.torch_stream = torch.cuda.ExternalStream(int(self.stream.handle))
        super().__init__(problem, geometry, seed)
        self.kernel = None
        self.compiled = None

    @property
    def arch(self) -> str:
        return compile_arch(self.features.arch, "sm_{}{}".format(*self.torch.cuda.get_device_capability()))

    def load(self, source: str, function: str, lineinfo: bool = False) -> dict:
        self.compiled = compile_cuda(source, kernels=(function,), defines=self.geometry.defines(), arch=self.arch,
                                     lineinfo=lineinfo, libraries=self.features.libraries)
        self.kernel = self.compiled.object_code.get_kernel(function)
        if self.features.dynamic_smem:
            extended_launch.allow_dynamic_smem(self.kernel.handle, 0, self.features.dynamic_smem,
                                               self.torch.cuda.get_device_name(0))
        return {"arch": self.compiled.arch, "resources": self.compiled.resources_dict()}

    def sass_failures(self, function: str, *extra: str) -> list[str]:
        from graders.cuda_engine import sass
        return sass.check(self.compiled.cubin, function, (*self.problem.sass_requirements, *extra),
                          disassemble_always=False)[0]

    @functools.cached_property
    def sm_count(self) -> int:
        return self.torch.cuda.get_device_properties(0).multi_processor_count

    def launch(self, out, inputs: list, shape: Shape) -> None:
        grid = self.problem.grid(shape, self.geometry.tile)
        if self.features.persistent:
            grid = extended_launch.persistent_grid(math.prod(grid), self.sm_count, self.features.cluster)
        if self.features.through_driver:
            self.launch_extended(grid, out, inputs, shape)
            return
        config = LaunchConfig(grid=grid, block=(*self.geometry.block, 1))
        args = [np.uint64(t.data_ptr()) for t in (out, *inputs)]
        args += [np.int32(v) for v in self.problem.sizes(shape)]
        launch(self.stream, config, self.kernel, *args)

    def launch_extended(self, grid: tuple[int, int, int], out, inputs: list, shape: Shape) -> None:
        """The launch through ``cuLaunchKernelEx``: dynamic shared memory, the cluster attribute and the spec's
        tensor maps encoded over this launch's tensors, after the pointers and sizes."""
        tensors = dict(zip(extended_launch.operand_names(self.problem.signature), (out, *inputs)))
        maps = [extended_launch.encode(extended_launch.map_fields(
                    spec, str(tensors[spec.operand].dtype).removeprefix("torch."), tuple(tensors[spec.operand].shape),
                    tuple(tensors[spec.operand].stride()), tensors[spec.operand].element_size(),
                    self.geometry.defines()), tensors[spec.operand].data_ptr())
                for spec in self.features.tensor_maps]
        arguments = extended_launch.KernelArguments([t.data_ptr() for t in (out, *inputs)],
                                                    list(self.problem.sizes(shape)), maps)
        config = extended_launch.launch_config(grid, (*self.geometry.block, 1), int(self.stream.handle),
                                               self.features)
        extended_launch.launch(self.kernel.handle, config, arguments)

    def instruction_ceiling(self, probe: InstructionProbe) -> dict:
        """``probe`` on every SM (PROBE_BLOCKS_PER_SM blocks of PROBE_THREADS threads each), the median of
        PROBE_LAUNCHES launches after one warm-up, each timed with CUDA events on the kernel's stream."""
        torch = self.torch
        code = compile_cuda(probe.source, kernels=("probe",), arch=self.arch).object_code.get_kernel("probe")
        blocks = torch.cuda.get_device_properties(0).multi_processor_count * PROBE_BLOCKS_PER_SM
        config = LaunchConfig(grid=(blocks, 1, 1), block=(PROBE_THREADS, 1, 1))
        seconds = []
        with self.enqueue():
            out = torch.empty(blocks * PROBE_THREADS, device=self.device)
            for _ in range(PROBE_LAUNCHES + 1):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                launch(self.stream, config, code, np.uint64(out.data_ptr()), np.int32(PROBE_ITERATIONS))
                end.record()
                end.synchronize()
                seconds.append(start.elapsed_time(end) / 1e3)
        median = sorted(seconds[1:])[PROBE_LAUNCHES // 2]
        work = blocks * PROBE_THREADS // 32 * PROBE_ITERATIONS * probe.work_per_warp_iteration
        return {"name": probe.name, "throughput": work / median, "median_s": median, "launches": PROBE_LAUNCHES}

    def timer(self, subjects: dict):
        from graders.cuda_engine.timing import CudaTimer
        return CudaTimer(subjects, self.torch_stream)

    def peaks(self) -> dict[str, float]:
        from graders.cuda_engine.timing import peaks
        return peaks()

    def enqueue(self):
        return self.torch.cuda.stream(self.torch_stream)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def finish_launch(self, shape: str) -> None:
        """Wait for the kernel's stream, at most ``launch_timeout_s``: a kernel still running then (a deadlock,
        an endless loop) is `LaunchHung`, found in seconds rather than at the child's limit."""
        done = self.stream.record()
        if not wait_until(lambda: done.is_done, self.launch_timeout_s):
            raise LaunchHung(self.launch_timeout_s, shape)
        self.synchronize()

    def release(self) -> None:
        self.torch.cuda.empty_cache()

    def clocks(self) -> dict:
        from graders.cuda_engine.timing import clocks
        return clocks()


def wait_until(finished, limit_s: float) -> bool:
    """Poll ``finished()`` until it is true (True) or ``limit_s`` seconds have passed (False), sleeping from 50 µs
    up to 10 ms between polls."""
    deadline, pause = time.monotonic() + limit_s, 50e-6
    while not finished():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 0.01)
    return True


def guard_damage(buffer) -> str:
    """'' if both guard regions of ``buffer`` still hold canaries, else where they were overwritten."""
    import torch
    words = buffer.view(torch.int32)
    n = words.numel() - 2 * GUARD_ELEMENTS
    bad_before = (words[:GUARD_ELEMENTS] != CANARY).nonzero().flatten()
    bad_after = (words[-GUARD_ELEMENTS:] != CANARY).nonzero().flatten()
    parts = []
    if len(bad_after):
        parts.append(f"{len(bad_after)} value(s) after the end of the output (the first at flat index "
                     f"{n + int(bad_after[0])} of an output of {n} elements)")
    if len(bad_before):
        parts.append(f"{len(bad_before)} value(s) before its start (the nearest at flat index "
                     f"{int(bad_before[-1]) - GUARD_ELEMENTS})")
    return "; ".join(parts)


def verdict(problem: Problem, out, expected) -> str:
    """'' if ``out`` is right: the problem's own ``compare`` (sgemm's tolerances), else `mismatch` with its
    ``atol``."""
    return problem.compare(out, expected) if problem.compare else mismatch(out, expected, problem.atol)


def mismatch(out, expected, atol: float) -> str:
    """'' if ``out`` matches ``expected``, else how many elements differ and the first one."""
    import torch
    bad = ~torch.isclose(out, expected, rtol=0.0, atol=atol) if atol else out != expected
    count = int(bad.sum())
    if not count:
        return ""
    index = tuple(int(i) for i in bad.nonzero()[0])
    got, want = float(out[index]), float(expected[index])
    where = "out" + "".join(f"[{i}]" for i in index)
    never = " (NaN: your kernel never wrote it)" if math.isnan(got) else ""
    digits = 6 if f"{want:.6g}" != f"{got:.6g}" else 9   # 9 digits tell any two fp32 values apart
    return (f"{count} of {out.numel()} values wrong; first at {where}: expected {want:.{digits}g}, "
            f"got {got:.{digits}g}{never}")


# the phases of `check_and_time` as its messages name them -> as `Phases` records them
PHASE_NAMES = {"compiling": "compile", "checking correctness": "correctness", "timing": "timing",
               "re-checking correctness after timing": "recheck"}


class Phases:
    """Seconds spent in each phase of a grading, written into ``seconds`` (name -> seconds, 3 decimals): `done`
    closes the phase that began at the previous `done` (or at creation)."""

    def __init__(self, seconds: dict):
        self.seconds, self._since = seconds, time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._since, 3)
        self._since = now


def _is_cuda_error(exc: Exception) -> bool:
    return "CUDA" in type(exc).__name__ or "CUDA" in str(exc)


def _crashed(phase: str, exc: Exception) -> dict:
    return {"status": Status.CRASHED, "message": f"CUDA error while {phase}: {exc}"}


def check_and_time(bench: Bench, kernel: KernelSpec, source: str, budget_s: float) -> dict:
    """Phases 1-4 of the module docstring on ``bench``: the answer's measurements, status and message.
    A CUDA error gives status ``crashed``; any other exception is the grader's own and propagates."""
    result: dict = {"precision": bench.problem.precision} if bench.problem.precision else {}
    phases = result["phases"] = {}    # seconds of each phase that ran (`Phases`)
    clock = Phases(phases)
    phase = "compiling"
    try:
        try:
            result["compile"] = bench.load(source, kernel.function)
        except CompileError as exc:
            return result | {"status": Status.COMPILE_ERROR, "message": str(exc)}
        finally:
            clock.done("compile")
        unmet = []
        requirements = [*bench.problem.sass_requirements, *kernel.sass_requirements]
        if requirements:
            unmet = bench.sass_failures(kernel.function, *kernel.sass_requirements)
            result["sass"] = {"requirements": requirements, "unmet": unmet}
            clock.done("sass")
        phase = "checking correctness"
        result["checks"] = checks = []
        for shape in kernel.check_shapes:
            checks.append(bench.check(shape))
            if not checks[-1]["ok"]:
                clock.done("correctness")
                return result | {"status": checks[-1]["status"], "message": checks[-1]["message"]}
        bench.release()
        clock.done("correctness")
        phase = "timing"
        try:
            result["timing"] = timing = bench.time(kernel.perf_shape, budget_s)
        except TimedLaunchFailed as failed:
            return result | {"status": failed.status, "message": str(failed)}
        finally:
            clock.done("timing")
        result["clocks_after"] = bench.clocks()
        bench.release()
        phase = "re-checking correctness after timing"
        for shape in dict.fromkeys([kernel.perf_shape, *kernel.check_shapes]):
            check = bench.check(shape)
            checks.append(check | {"after_timing": True})
            if not check["ok"]:
                clock.done("recheck")
                return result | {"status": check["status"], "message": "after being timed, the kernel's results "
                                 "were wrong (does it skip work or reuse old results?) " + check["message"]}
        clock.done("recheck")
    except LaunchHung as hung:
        clock.done(PHASE_NAMES[phase])
        return result | hung.answer()
    except Exception as exc:
        if not _is_cuda_error(exc):
            raise
        clock.done(PHASE_NAMES[phase])
        return result | _crashed(phase, exc)
    if unmet:
        return result | {"status": Status.UNMET, "message": f"correct, but {'; '.join(unmet)}. Its speed is "
                         "not credited"}
    too_fast = implausible(timing)
    return result | {"status": Status.IMPLAUSIBLE if too_fast else Status.OK, "message": too_fast}


# a grading whose kernel ran and was right everywhere, or never ran: the process may grade the submission's next
# kernel (`graders.sandbox.session`); after a CUDA error, a wrong result or a write outside the output, a fresh one
SERVES_AGAIN = frozenset({Status.OK, Status.IMPLAUSIBLE, Status.UNMET, Status.COMPILE_ERROR})


def reusable(answer: dict) -> bool:
    return answer.get("status") in SERVES_AGAIN


def handle(request: dict) -> dict:
    """One kernel's grading (`check_and_time`); ``phases`` adds ``setup`` (spec, problem and torch imported) and
    ``cuda_start`` (the device, its stream and the environment record) to the phases' seconds."""
    setup = {}
    clock = Phases(setup)
    spec = load_spec(request["spec_path"])
    kernel: KernelSpec = spec.kernel(request["kernel_id"])
    geometry = resolve_geometry(kernel, request.get("block"), request.get("tile"), request.get("params"))
    definition = problem(kernel.kind)
    import torch
    if not torch.cuda.is_available():
        return {"status": Status.NO_GPU, "message": "the grading process found no CUDA GPU"}
    from graders.cuda_engine.timing import environment
    seed = int(request["seed"])
    result: dict = {"kernel_id": kernel.id, "geometry": {"block": list(geometry.block),
                                                          "tile": list(geometry.tile)}, "seed": seed}
    if geometry.params:
        result["geometry"]["params"] = dict(geometry.params)
    clock.done("setup")
    try:
        harness = Harness(definition, geometry, float(request.get("memory_fraction", 0.25)), seed, kernel.launch,
                          float(request.get("launch_timeout_s", DEFAULT_LAUNCH_TIMEOUT_S)))
        result["environment"] = environment()
    except Exception as exc:
        if not _is_cuda_error(exc):
            raise
        return result | _crashed("starting CUDA", exc)
    clock.done("cuda_start")
    graded = check_and_time(harness, kernel, request["source"], float(request.get("budget_s", 10.0)))
    return result | graded | {"phases": setup | graded["phases"]}
