"""Child handler (run by `graders.sandbox.run.run_child`): check and time one Triton kernel.

The request carries the kernel's source as read from its cell (`graders.triton_engine.kernel_source`) and the
launch (``BLOCK_SIZE``, ``num_warps``). The child runs the source in a fresh namespace holding only ``triton``
and ``tl``, and launches the kernel itself, ``kernel[grid](out, *inputs, *sizes, BLOCK_SIZE=..., num_warps=...)``
with the problem kind's arguments (`graders.cuda_engine.problems`); inputs, guarded outputs, timing and checks are
the CUDA C++ engine's (`graders.cuda_engine.child.check_and_time`: fresh inputs for every timed launch, NaN
poisoning, guard bands, the re-check after timing). Every floating-point input also sits between NaN fences, so
a load past its end gives NaN, not a neighbour's value. An output whose kind is not fp32
(``TritonProblem.out_dtype`` of ``tracks/triton/problem.py``) ends where its guard band begins; the guard
counts 4-byte words.

Where the launch is ``autotune`` (`graders.triton_engine.spec`), the kernel's ``@triton.autotune`` decorator is
read from the source (`graders.triton_engine.kernel_source.read_autotune`), never run: its lines are blanked
and the child wraps the kernel in ``triton.autotune`` with the configs and key it read, so Triton benchmarks
each config once per key (on the harness's stream) and launches the fastest, ``kernel[grid](out, *inputs,
*sizes)`` with the grid a function of the running config's tile. Triton's interpreter (the check cell on CPU)
runs the first config only.

Triton compiles on the kernel's first launch at each ``BLOCK_SIZE``, into a cache in the child's private
``/tmp`` (``TRITON_CACHE_DIR``, set by the parent), within the child's wall-clock limit. A compile error is
status ``compile_error``; an exception the kernel raises as it runs (in Triton's interpreter) ``kernel_error``.

The student's Python runs here (the source is executed to define the kernel, and Triton runs Python as it
compiles), so this child serves one request: the module defines no ``reusable`` (`graders.sandbox.session`).

Modes: ``grade`` (the GPU: `check_and_time`) and ``check``: correctness only, at the request's shapes, on the GPU
or, with ``TRITON_INTERPRET=1`` set by the parent, in Triton's interpreter on CPU tensors (the check cell).
"""
from __future__ import annotations

import ast
import linecache
import math
from types import ModuleType

from graders.cuda_engine.child import (CANARY, GUARD_ELEMENTS, Bench, Harness, LaunchHung, Phases, TimedLaunchFailed,
                                       _crashed, _is_cuda_error, check_and_time)
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.problems import Problem, Shape, problem
from graders.result import Status
from graders.settings import DEFAULT_LAUNCH_TIMEOUT_S
from graders.triton_engine.kernel_source import Autotune, is_triton_jit, kernel_problems, read_autotune, tl_chains
from graders.triton_engine.spec import AUTOTUNE, Launch, load_triton_spec, resolve_launch

FENCE_ELEMENTS = 1 << 16   # NaN before and after every floating-point input
SOURCE_FILE = "<your kernel's cell>"
FORK_PRELOAD = ("torch", "triton")   # imported once by a fork server (`graders.sandbox.child`): checks on the CPU
_MISSING = object()


class KernelRaised(Exception):
    """The kernel failed to compile or raised as it ran; ``status`` says which."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


class TritonLaunch:
    """What makes a `graders.cuda_engine.child.Bench` a Triton one: loading the kernel from its source, the
    launch, fenced inputs, and the kernel's own failures as statuses. Mixed in before the bench class."""

    launch_spec: Launch
    autotune: Autotune | None = None

    def load(self, source: str, function: str) -> dict:
        import triton
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
        tree = ast.parse(source)
        problems = [f"line {n.lineno}: only @triton.jit functions are run" for n in tree.body if not is_triton_jit(n)]
        problems += kernel_problems(tree) + tl_problems(source, tl)
        if problems:
            raise CompileError("your cell holds what is not Triton kernel code: " + "; ".join(problems[:3]))
        source = self._read_autotune(tree, source, function)
        linecache.cache[SOURCE_FILE] = (len(source), None, source.splitlines(True), SOURCE_FILE)
        namespace = {"__name__": "submitted_kernel", "triton": triton, "tl": tl}
        try:
            exec(compile(source, SOURCE_FILE, "exec", dont_inherit=True), namespace)   # as the notebook runs it
        except Exception as exc:
            raise CompileError(f"defining your kernel raised {type(exc).__name__}: {exc}") from None
        kernel = namespace.get(function)
        if not isinstance(kernel, (JITFunction, InterpretedFunction)):
            raise CompileError(f"your cell defines no @triton.jit function {function}")
        interpreted = isinstance(kernel, InterpretedFunction)
        if interpreted:
            scalar_index_in_interpreter()
        if self.autotune and not interpreted:
            configs = [triton.Config(dict(c.values), num_warps=c.num_warps, num_stages=c.num_stages)
                       for c in self.autotune.configs]
            kernel = triton.autotune(configs=configs, key=list(self.autotune.key))(kernel)
        self.kernel = kernel
        found = {"triton": triton.__version__, "launch": self.launch_spec.as_dict(), "interpreted": interpreted}
        return found | ({"autotune": self.autotune.as_dict()} if self.autotune else {})

    def _read_autotune(self, tree: ast.Module, source: str, function: str) -> str:
        """``source`` with the autotune decorator's lines blanked, its configs in ``self.autotune``. `CompileError`
        where the launch and the decorator disagree."""
        found = {n.name: (n, read_autotune(n)[0]) for n in tree.body if isinstance(n, ast.FunctionDef)}
        tuned = [name for name, (_, autotune) in found.items() if autotune]
        node, self.autotune = found.get(function, (None, None))
        wanted = self.launch_spec.block_size == AUTOTUNE
        if tuned and tuned != [function]:
            raise CompileError(f"only {function} may be decorated with @triton.autotune, not {', '.join(tuned)}")
        if wanted and not self.autotune:
            raise CompileError(f"this kernel is launched with its own configs: decorate {function} with "
                               "@triton.autotune(configs=[triton.Config({...}, num_warps=..., num_stages=...), ...], "
                               "key=[...]) above @triton.jit")
        if self.autotune and not wanted:
            raise CompileError(f"this kernel's launch is the grader's and your launch dict's: {function} takes no "
                               "@triton.autotune")
        if not self.autotune:
            return source
        missing = [f"config {n} sets no {name}" for n, config in enumerate(self.autotune.configs, start=1)
                   for name in self.launch_spec.autotune_tile if name not in dict(config.values)]
        if missing:
            raise CompileError(f"every autotune config sets the tile, {' and '.join(self.launch_spec.autotune_tile)}"
                               f": {'; '.join(missing[:3])}")
        decorator = node.decorator_list[0]
        lines = source.split("\n")
        lines[decorator.lineno - 1:decorator.end_lineno] = [""] * (decorator.end_lineno - decorator.lineno + 1)
        return "\n".join(lines)

    def sass_failures(self, function: str) -> list[str]:
        return []

    def launch(self, out, inputs: list, shape: Shape) -> None:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources
        problem: Problem = self.problem
        grid = self.launch_spec.grid(problem, shape)
        args = [out, *inputs, *problem.sizes(shape)]
        if self.launch_spec.block_size != AUTOTUNE:
            options = {"BLOCK_SIZE": self.launch_spec.block(shape), "num_warps": self.launch_spec.num_warps}
        else:   # the autotuner passes its config's; the interpreter runs the first
            options = {} if hasattr(self.kernel, "configs") else dict(self.autotune.configs[0].values)
        try:
            with self.enqueue():
                self.kernel[grid](*args, **options)
        except (CompilationError, OutOfResources) as exc:
            raise KernelRaised(Status.COMPILE_ERROR, f"your kernel did not compile: {exc}") from None
        except Exception as exc:
            if _is_cuda_error(exc):
                raise
            raise KernelRaised(Status.KERNEL_ERROR, f"your kernel raised {type(exc).__name__}: {exc}") from None

    def output(self, shape: Shape):
        """The CUDA engine's guarded output (`Bench.output`), in the kind's ``out_dtype`` where it has one: then
        the body ends where the guard after it begins."""
        torch = self.torch
        dtype = getattr(torch, getattr(self.problem, "out_dtype", "float32"))
        if dtype == torch.float32:
            return super().output(shape)
        out_shape = self.problem.out_shape(shape)
        n = math.prod(out_shape)
        words = -(-n * dtype.itemsize // 4)
        with self.enqueue():
            buffer = torch.empty(words + 2 * GUARD_ELEMENTS, dtype=torch.float32, device=self.device)
            buffer.view(torch.int32).fill_(CANARY)
            end = (GUARD_ELEMENTS + words) * 4 // dtype.itemsize
            body = buffer.view(dtype)[end - n:end]
            body.fill_(float("nan"))
        return buffer, body.view(out_shape)

    def time(self, shape: Shape, budget_s: float) -> dict:
        try:
            found = super().time(shape, budget_s)
        except KernelRaised as exc:
            raise TimedLaunchFailed(exc.status, f"while timed: {exc}") from None
        best = getattr(self.kernel, "best_config", None)
        if best is not None:
            found["autotuned"] = best.kwargs | {"num_warps": best.num_warps, "num_stages": best.num_stages}
        return found

    def inputs(self, shape: Shape) -> list:
        made = super().inputs(shape)
        with self.enqueue():
            return [fenced(t) for t in made]

    def check(self, shape: Shape) -> dict:
        try:
            return super().check(shape)
        except KernelRaised as exc:
            label = "x".join(map(str, shape))
            return {"shape": list(shape), "ok": False, "status": exc.status, "message": f"at shape {label}: {exc}"}


def tl_problems(source: str, tl: ModuleType) -> list[str]:
    """Each ``tl.`` chain of ``source`` that leaves ``triton.language`` (a module outside it, or an object defined
    outside ``triton``) or ends at a module, as ``line N: why``. Triton calls what a chain leads to as it
    compiles: this keeps that to Triton's own functions. A name ``tl`` does not hold is left to Triton's error."""
    problems = []
    for line, names in tl_chains(source):
        found, path = tl, "tl"
        for i, name in enumerate(names):
            found, path = getattr(found, name, _MISSING), f"{path}.{name}"
            if found is _MISSING:
                break
            if isinstance(found, ModuleType):
                inside = found.__name__.startswith("triton.language")
                if not inside or i == len(names) - 1:
                    problems.append(f"line {line}: {path} is {'a module' if inside else 'not Triton'}")
                    break
            elif not isinstance(found, (bool, int, float, str)) and not (
                    getattr(found, "__module__", None) or type(found).__module__).startswith("triton."):
                problems.append(f"line {line}: {path} is not Triton")
                break
    return problems


def scalar_index_in_interpreter() -> None:
    """Make a scalar usable as an index in Triton's interpreter (``range(0, K)`` in a kernel): the interpreter turns
    its one-element array into an int with ``int(array)``, which numpy 2.4 refuses for arrays of one dimension.
    The interpreter sets its tensor patches anew for every launch and undoes them after: this adds one more."""
    from triton.runtime import interpreter
    patch = interpreter._patch_lang_tensor
    if getattr(patch, "scalar_index", False):
        return

    def patched(tensor, scope) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched.scalar_index = True
    interpreter._patch_lang_tensor = patched


def fenced(tensor):
    """``tensor``'s values in a buffer that holds NaN for `FENCE_ELEMENTS` before and after them (floating point
    only; others as they are)."""
    import torch
    if not tensor.is_floating_point():
        return tensor
    n = tensor.numel()
    buffer = torch.full((n + 2 * FENCE_ELEMENTS,), float("nan"), dtype=tensor.dtype, device=tensor.device)
    body = buffer[FENCE_ELEMENTS:FENCE_ELEMENTS + n].view(tensor.shape)
    body.copy_(tensor)
    return body


class InterpretedBench(TritonLaunch, Bench):
    """The bench on CPU tensors, the kernel run by Triton's interpreter (``TRITON_INTERPRET=1``)."""

    def __init__(self, problem: Problem, launch: Launch, seed: int):
        from graders.cuda_engine.spec import Geometry
        super().__init__(problem, Geometry((1, 1), (1, 1)), seed)
        self.launch_spec = launch


class TritonHarness(TritonLaunch, Harness):
    """The grading bench: `graders.cuda_engine.child.Harness`'s device, stream, timer and ceilings; the kernel
    launched by Triton on the harness's stream."""

    def __init__(self, problem: Problem, launch: Launch, memory_fraction: float, seed: int,
                 launch_timeout_s: float = DEFAULT_LAUNCH_TIMEOUT_S):
        from graders.cuda_engine.spec import Geometry
        super().__init__(problem, Geometry((1, 1), (1, 1)), memory_fraction, seed,
                         launch_timeout_s=launch_timeout_s)
        self.launch_spec = launch


def checked(bench: Bench, source: str, function: str, shapes: list[Shape]) -> dict:
    """Correctness only: the kernel loaded and run once at each of ``shapes``, stopping at the first failure."""
    try:
        found: dict = {"compile": bench.load(source, function), "checks": []}
    except CompileError as exc:
        return {"status": Status.COMPILE_ERROR, "message": str(exc), "checks": []}
    for shape in shapes:
        try:
            found["checks"].append(bench.check(shape))
        except LaunchHung as hung:
            return found | hung.answer()
        if not found["checks"][-1]["ok"]:
            return found | {"status": found["checks"][-1]["status"], "message": found["checks"][-1]["message"]}
    return found | {"status": Status.OK, "message": ""}


def handle(request: dict) -> dict:
    setup: dict = {}
    clock = Phases(setup)
    spec = load_triton_spec(request["spec_path"])
    kernel = spec.kernel(request["kernel_id"])
    launch = resolve_launch(spec.launches[kernel.id], request.get("launch"))
    definition = problem(kernel.kind, "triton")
    seed = int(request["seed"])
    import torch
    result: dict = {"kernel_id": kernel.id, "launch": launch.as_dict(), "seed": seed}
    if request.get("mode") == "check" and request.get("device") == "cpu":
        bench = InterpretedBench(definition, launch, seed)
        shapes = [tuple(s) for s in request["shapes"]]
        return result | checked(bench, request["source"], kernel.function, shapes)
    if not torch.cuda.is_available():
        return {"status": Status.NO_GPU, "message": "the grading process found no CUDA GPU"}
    from graders.cuda_engine.timing import environment
    clock.done("setup")
    try:
        harness = TritonHarness(definition, launch, float(request.get("memory_fraction", 0.25)), seed,
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
