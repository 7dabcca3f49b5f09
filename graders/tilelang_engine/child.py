"""Child handler (run by `graders.sandbox.run.run_child`): compile, check and time one TileLang kernel.

The request carries the builder's source as read from its cell (`graders.tilelang_engine.kernel_source`). The
child checks the source against the DSL's allowlist again, blanks its ``@tilelang.jit`` line, runs the rest in a
fresh namespace holding only ``T`` (``tilelang.language``), calls the builder with its own defaults (the
student's tiles, stages and threads) and compiles the ``@T.prim_func`` it returns once, with TileLang, for this
GPU's architecture (``sm_90a`` on Hopper: its warp-specialised pipelines need the ``a`` features), its sizes
``T.dynamic`` so that one compile serves every shape. The kernel is launched ``kernel(out, *inputs)`` on the
harness's stream (TileLang takes torch's current stream); everything else is the Triton engine's bench
(`graders.triton_engine.child.TritonLaunch`: inputs between NaN fences, the output in the kind's dtype ending
where its guard band begins) and the CUDA C++ engine's ``check_and_time`` (fresh inputs for every timed launch,
NaN poisoning, guard bands, the re-check after timing).

A compile error (TileLang's, or nvcc's under it) is status ``compile_error``; an exception the launch raises
(TileLang refuses a tensor whose shape or dtype its signature does not take) ``kernel_error``. The student's
Python runs here (the builder, and TileLang's parse of the prim_func), so this child serves one request.

Modes: ``grade`` (the GPU: `check_and_time`) and ``check``: on the GPU, correctness at the request's shapes;
without one (``device`` ``cpu``), the kernel only lowered by TileLang to CUDA C++ for `CPU_ARCH`, which needs no
GPU and no nvcc: what the check cell can say on a student's machine.
"""
from __future__ import annotations

import ast
import linecache
import traceback

from graders.cuda_engine.child import Harness, Phases, _crashed, _is_cuda_error, check_and_time
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.problems import Problem, Shape, problem
from graders.cuda_engine.spec import Geometry
from graders.result import Status
from graders.settings import DEFAULT_LAUNCH_TIMEOUT_S
from graders.tilelang_engine.kernel_source import is_tilelang_jit, kernel_problems
from graders.tilelang_engine.spec import load_tilelang_spec
from graders.triton_engine.child import KernelRaised, TritonLaunch, checked

SOURCE_FILE = "<your kernel's cell>"
CPU_ARCH = "sm_90a"      # the grading GPUs' (H100): what a check without a GPU lowers for
MESSAGE_CHARS = 1500     # of a TileLang or nvcc error, its end (TVM puts its C++ backtrace first)


def _error(what: str, exc: Exception) -> CompileError:
    """``exc`` as a `CompileError`: its message's end, and the last line of the cell it came through."""
    text = str(exc).strip()
    text = text if len(text) <= MESSAGE_CHARS else "..." + text[-MESSAGE_CHARS:]
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == SOURCE_FILE]
    return CompileError(f"{what}{f' at line {lines[-1]} of your cell' if lines else ''}: {type(exc).__name__}: {text}")


def build(source: str, function: str):
    """The ``@T.prim_func`` that ``function`` of ``source`` returns when called with its defaults. Raises
    `CompileError` for what is not TileLang kernel code or does not build."""
    import tilelang.language as T
    from tvm.tirx import PrimFunc
    tree = ast.parse(source)
    builders = [n for n in tree.body if is_tilelang_jit(n)]
    problems = [f"line {n.lineno}: only the @tilelang.jit builder is run" for n in tree.body if not is_tilelang_jit(n)]
    problems += [p for n in builders for p in kernel_problems(n)]
    node = next((n for n in builders if n.name == function), None)
    if node is None:
        problems.append(f"your cell defines no @tilelang.jit function {function}")
    if problems:
        raise CompileError("your cell holds what is not TileLang kernel code: " + "; ".join(problems[:3]))
    lines = source.split("\n")
    lines[node.decorator_list[0].lineno - 1] = ""   # the grader compiles, with its own target
    source = "\n".join(lines)
    linecache.cache[SOURCE_FILE] = (len(source), None, source.splitlines(True), SOURCE_FILE)   # TileLang reads it
    namespace = {"__name__": "submitted_kernel", "T": T}
    try:
        exec(compile(source, SOURCE_FILE, "exec", dont_inherit=True), namespace)   # as the notebook runs it
        built = namespace[function]()
    except Exception as exc:
        raise _error(f"building your kernel ({function}() with its defaults) raised", exc) from None
    if not isinstance(built, PrimFunc):
        raise CompileError(f"{function}() returned {type(built).__name__}, not the @T.prim_func it defines")
    return built


def summary(cuda_source: str, arch: str) -> dict:
    """What a compile says about the kernel: TileLang's version, the architecture, and the CUDA C++ it generated
    (its lines, and whether it loads through TMA and multiplies with wgmma)."""
    import tilelang
    return {"tilelang": tilelang.__version__, "arch": arch, "cuda_lines": cuda_source.count("\n"),
            "tma": "tma_load" in cuda_source, "wgmma": "wgmma" in cuda_source}


def lower(source: str, function: str, arch: str) -> dict:
    """The kernel lowered by TileLang to CUDA C++ for ``arch`` (no GPU or nvcc needed): `summary`. Raises
    `CompileError`."""
    import tilelang
    from tvm.target import Target
    prim = build(source, function)
    target = Target({"kind": "cuda", "arch": arch})
    try:
        with target:
            return summary(tilelang.lower(prim, target=target).kernel_source, arch)
    except Exception as exc:
        raise _error("TileLang did not compile your kernel", exc) from None


class TileLangLaunch(TritonLaunch):
    """What makes a `graders.cuda_engine.child.Bench` a TileLang one: the Triton engine's fenced inputs, typed
    outputs and failures as statuses, with the kernel compiled by TileLang and launched as ``kernel(out,
    *inputs)``. Mixed in before the bench class."""

    target_arch: str = CPU_ARCH   # not `Harness.arch`: that one is NVRTC's

    def load(self, source: str, function: str) -> dict:
        import tilelang
        prim = build(source, function)
        try:
            self.kernel = tilelang.compile(prim, target={"kind": "cuda", "arch": self.target_arch})
        except Exception as exc:
            raise _error("TileLang did not compile your kernel", exc) from None
        return summary(self.kernel.get_kernel_source(), self.target_arch)

    def launch(self, out, inputs: list, shape: Shape) -> None:
        try:
            with self.enqueue():
                self.kernel(out, *inputs)
        except Exception as exc:
            if _is_cuda_error(exc):
                raise
            raise KernelRaised(Status.KERNEL_ERROR, f"your kernel raised {type(exc).__name__}: {exc}") from None


class TileLangHarness(TileLangLaunch, Harness):
    """The grading bench: `graders.cuda_engine.child.Harness`'s device, stream, timer and ceilings; the kernel
    compiled for the device's architecture."""

    def __init__(self, problem: Problem, memory_fraction: float, seed: int,
                 launch_timeout_s: float = DEFAULT_LAUNCH_TIMEOUT_S):
        super().__init__(problem, Geometry((1, 1), (1, 1)), memory_fraction, seed, launch_timeout_s=launch_timeout_s)
        major, minor = self.torch.cuda.get_device_capability()
        self.target_arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def handle(request: dict) -> dict:
    setup: dict = {}
    clock = Phases(setup)
    spec = load_tilelang_spec(request["spec_path"])
    kernel = spec.kernel(request["kernel_id"])
    definition = problem(kernel.kind, "tilelang")
    seed = int(request["seed"])
    result: dict = {"kernel_id": kernel.id, "seed": seed}
    if request.get("mode") == "check" and request.get("device") == "cpu":
        try:
            return result | {"compile": lower(request["source"], kernel.function, CPU_ARCH), "status": Status.OK,
                             "message": ""}
        except CompileError as exc:
            return result | {"status": Status.COMPILE_ERROR, "message": str(exc)}
    import torch
    if not torch.cuda.is_available():
        return {"status": Status.NO_GPU, "message": "the grading process found no CUDA GPU"}
    from graders.cuda_engine.timing import environment
    clock.done("setup")
    try:
        harness = TileLangHarness(definition, float(request.get("memory_fraction", 0.25)), seed,
                                  float(request.get("launch_timeout_s", DEFAULT_LAUNCH_TIMEOUT_S)))
        result["environment"] = environment()
    except Exception as exc:
        if not _is_cuda_error(exc):
            raise
        return result | _crashed("starting CUDA", exc)
    clock.done("cuda_start")
    if request.get("mode") == "check":
        return result | checked(harness, request["source"], kernel.function, [tuple(s) for s in request["shapes"]])
    graded = check_and_time(harness, kernel, request["source"], float(request.get("budget_s", 10.0)))
    return result | graded | {"phases": setup | graded["phases"]}
