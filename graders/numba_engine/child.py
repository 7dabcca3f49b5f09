"""Child-process side of puzzle grading: run the student's kernel source on fresh inputs and report.

Request: ``{"puzzle", "source", "kernel_name", "mode": "public"|"hidden", "seed", "target": "sim"|"gpu"}``, or
``{"launches": [request, ...]}`` for several kernels of one submission in turn.
The source is checked against the numba-CUDA kernel subset (`graders.numba_engine.numba_subset`) before any of it runs;
outside it, the answer is the check's message and nothing is run. On ``sim`` (numba-cuda's simulator,
``NUMBA_ENABLE_CUDASIM=1`` set by the parent) every global access is counted per thread and the puzzle's
access limits are checked; on ``gpu`` only correctness is checked.
Cases run in order, all on inputs drawn from one ``np.random.default_rng(seed)``, and stop at the first
failure, whose message names the case (in CUDA's words: ``a[4]; size = 4; <<<1, 4>>>``), index, expected
and got. Access limits are counted on every case: a message over them names each case over them with its launch,
then, once, a rule of the whole kernel it missed (shared memory where the puzzle asks for it). The answer is a
`GradeResult` as a dict. On ``sim`` an access inside a ``print(...)`` counts like any other (a GPU reads what it
prints from global memory too); a message over the limits says how many of a thread's were made there.
"""
from __future__ import annotations

import ast
import inspect
import re
import sys
import threading

import numpy as np
from numba import config, cuda

from graders.numba_engine import catalogue
from graders.numba_engine.numba_subset import KernelSourceError, validate_kernel_source
from graders.numba_engine.puzzle import NOT_WRITTEN, Case, Puzzle
from graders.numba_engine.traced_array import AccessLog, Kind, TracedArray, printing
from graders.result import GradeResult, Status

_shared_arrays: list = []   # the simulator's shared-memory managers made since the last case began
PRINTING = "__printing__"   # a name the kernel subset forbids students, so only the grader's rewrite uses it


def handle(request: dict) -> dict:
    """One request's answer; a request of ``{"launches": [request, ...]}`` (one submission's kernels, in turn in this
    process) answers ``{"launches": [answer, ...]}``."""
    if "launches" in request:
        return {"launches": [handle(launch) for launch in request["launches"]]}
    target = request["target"]
    if (target == "sim") != bool(config.ENABLE_CUDASIM):
        raise RuntimeError(f"target {target!r} but NUMBA_ENABLE_CUDASIM={config.ENABLE_CUDASIM}")
    if target == "sim":
        _track_shared_memory()
    puzzle = catalogue.get(request["puzzle"])

    def answer(status: Status, message: str = "", **more) -> dict:
        return GradeResult(puzzle.id, status, message, hidden=request["mode"] == "hidden", seed=request["seed"],
                           target=target, **more).as_dict()

    try:    # defence in depth: the parent checked the source too, but nothing runs here unchecked
        validate_kernel_source(request["source"])
    except KernelSourceError as exc:
        return answer(Status.REFUSED, str(exc))
    try:
        kernel = _load_kernel(request["source"], request["kernel_name"], counted=target == "sim")
    except Exception as exc:
        return answer(Status.COMPILE_ERROR, f"your cell does not run: {_describe(exc)}")
    rng = np.random.default_rng(request["seed"])
    cases = puzzle.cases(request["mode"])
    violations: list[str] = []
    unshared = False
    names = list(inspect.signature(kernel.py_func).parameters)
    for number, case in enumerate(cases, 1):
        status, message, found = _run_case(puzzle, kernel, case, rng, target)
        if message == NOT_WRITTEN:
            return answer(status, message)
        if status != Status.OK:
            return answer(status, f"{case.describe(names)}: {message}", case=f"case {number} of {len(cases)}",
                          cases=number)
        unshared |= NO_SHARED_MEMORY in found
        if found := [v for v in found if v != NO_SHARED_MEMORY]:
            violations.append(f"case {number} of {len(cases)} ({case.describe(names)}): " + "; ".join(found))
    if unshared:
        violations.append(NO_SHARED_MEMORY)
    if violations:
        return answer(Status.LIMITS, "; ".join(violations), cases=len(cases))
    return answer(Status.OK, cases=len(cases))


def _load_kernel(source: str, name: str, counted: bool = False):
    """The kernel ``name`` that ``source`` defines; with ``counted`` (the simulator, where accesses are
    counted) each ``print(...)`` statement runs inside `printing`, which only notes its accesses apart."""
    namespace: dict = {"__name__": "student_cell"}
    code = _prints_noted(ast.parse(source)) if counted else source
    if counted:
        namespace[PRINTING] = printing
    exec(compile(code, "<your kernel cell>", "exec"), namespace)
    kernel = namespace[name]
    if not hasattr(kernel, "py_func"):
        raise TypeError(f"{name} is not decorated with @cuda.jit")
    return kernel


def _prints_noted(tree: ast.Module) -> ast.Module:
    """``tree`` with every ``print(...)`` statement wrapped in ``with __printing__():``."""
    class Wrap(ast.NodeTransformer):
        def visit_Expr(self, node: ast.Expr) -> ast.stmt:
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
                guard = ast.Call(ast.Name(PRINTING, ast.Load()), [], [])
                return ast.copy_location(ast.With([ast.withitem(guard)], [node]), node)
            return node

    return ast.fix_missing_locations(Wrap().visit(tree))


def _run_case(puzzle: Puzzle, kernel, case: Case, rng: np.random.Generator,
              target: str) -> tuple[Status, str, list[str]]:
    """(status, what went wrong, access-limit violations) of one launch on fresh inputs."""
    inputs = puzzle.make_inputs(case, rng)
    expected = puzzle.expected(case, inputs)
    out = np.full(case.out, np.nan, dtype=np.float32)      # poisoned: an unwritten cell stays NaN
    log = AccessLog()
    _shared_arrays.clear()
    try:
        names = _argument_names(kernel, 1 + len(inputs) + len(case.scalars))
        if target == "sim":
            arrays = [TracedArray(n, x, log) for n, x in zip(names, [out, *inputs])]
            kernel[case.blocks, case.threads](*arrays, *case.scalars)
        else:
            out = _launch_on_gpu(kernel, case, out, inputs, names)
    except OutOfBoundsWrite as exc:
        return Status.OOB_WRITE, f"the kernel made an {exc}", []
    except NotImplementedError:
        return Status.KERNEL_ERROR, NOT_WRITTEN, []
    except Exception as exc:
        return Status.KERNEL_ERROR, f"the kernel failed: {_describe(exc)}", []
    wrong = _compare(out, expected)
    if wrong:
        return Status.INCORRECT, wrong, []
    return Status.OK, "", _limit_violations(puzzle, case, log) if target == "sim" else []


GUARD = 16   # guard elements around each GPU array along every axis: catch out-of-bounds accesses
READ_POISON = np.array([0x7FC0DEAD], dtype=np.uint32).view(np.float32)[0]   # a NaN: reads past inputs
WRITE_SENTINEL = np.float32(-1.2345e37)                                      # writes past `out` change it


class OutOfBoundsWrite(IndexError):
    """A kernel on the GPU changed a guard band: it wrote outside an array."""


def _launch_on_gpu(kernel, case: Case, out: np.ndarray, inputs: list[np.ndarray],
                   names: list[str]) -> np.ndarray:
    """Launch on the GPU with every array inside a guard band, checked bit for bit afterwards.

    Input bands hold NaN, so an out-of-bounds read gives a wrong answer; the output's band holds a finite
    sentinel, so any out-of-bounds write (NaN included) shows, as it does in the simulator.
    """
    arrays = [out, *inputs]
    hosts = [_guarded(x, WRITE_SENTINEL if k == 0 else READ_POISON) for k, x in enumerate(arrays)]
    devices = [cuda.to_device(h) for h in hosts]
    views = [d[_interior(x.shape)] for d, x in zip(devices, arrays)]
    kernel[case.blocks, case.threads](*views, *case.scalars)
    cuda.synchronize()
    for name, device, host in zip(names, devices, hosts):
        if where := guard_violation(host, device.copy_to_host()):
            shape = tuple(n - 2 * GUARD for n in host.shape)
            index = ", ".join(map(str, where))
            raise OutOfBoundsWrite(f"out-of-bounds write to {name}[{index}] (shape {shape})")
    return views[0].copy_to_host()


def guard_violation(before: np.ndarray, after: np.ndarray) -> tuple[int, ...] | None:
    """The first guard-band position (as an index of the inner array) whose bits changed, if any."""
    band = np.ones(before.shape, dtype=bool)
    band[tuple(slice(GUARD, n - GUARD) for n in before.shape)] = False
    changed = band & (before.view(np.uint32) != after.view(np.uint32))
    if not changed.any():
        return None
    return tuple(int(i) - GUARD for i in np.argwhere(changed)[0])


def _interior(shape: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(GUARD, GUARD + n) for n in shape)


def _guarded(x: np.ndarray, fill: np.float32) -> np.ndarray:
    big = np.full(tuple(n + 2 * GUARD for n in x.shape), fill, dtype=x.dtype)
    big[_interior(x.shape)] = x
    return big


def _argument_names(kernel, count: int) -> list[str]:
    params = list(inspect.signature(kernel.py_func).parameters)
    if len(params) != count:
        raise TypeError(f"{kernel.py_func.__name__} takes {len(params)} argument(s) ({', '.join(params)}) but the "
                f"grader launches it with {count}: keep the signature of the stub")
    return params


def _compare(out: np.ndarray, expected: np.ndarray) -> str:
    """Empty when correct; otherwise the first wrong position, expected vs got."""
    unwritten = np.isnan(out) & ~np.isnan(expected)
    if unwritten.any():
        idx = _first(unwritten)
        return (f"out[{_index_text(idx)}] is NaN, expected {expected[idx]:g}: never written, or computed from "
                f"memory nothing wrote, which the grader fills with NaN ({int(unwritten.sum())} of {out.size} "
                "positions NaN)")
    wrong = ~np.isclose(out, expected, rtol=1e-5, atol=1e-5)
    if wrong.any():
        idx = _first(wrong)
        return (f"out[{_index_text(idx)}] = {out[idx]:g}, expected {expected[idx]:g}"
                f" ({int(wrong.sum())} of {out.size} positions wrong)")
    return ""


def _first(mask: np.ndarray) -> tuple[int, ...] | int:
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return idx[0] if len(idx) == 1 else idx


def _index_text(idx: tuple[int, ...] | int) -> str:
    """``3`` or ``1, 2``: an index as the student writes it between brackets."""
    return ", ".join(map(str, idx)) if isinstance(idx, tuple) else str(idx)


def _limit_violations(puzzle: Puzzle, case: Case, log: AccessLog) -> list[str]:
    limits, found = puzzle.limits, []
    kinds: tuple[tuple[Kind, int], ...] = (("reads", limits.max_reads(case)), ("writes", limits.writes))
    for kind, limit in kinds:
        over = {key: n for key, n in getattr(log, kind).items() if n > limit}
        if over:
            (block, thread), n = max(over.items(), key=lambda kv: kv[1])
            printed = log.printed.get((kind, (block, thread)), 0)
            found.append(f"threadIdx {thread} of blockIdx {block} made {n} global {kind}"
                         + (f" ({printed} of them inside print(...), which count like any other)" if printed
                            else "")
                         + f"; the limit is {limit} per thread ({len(over)} thread(s) over it)")
    if limits.block_writes is not None:
        over = {b: n for b, n in log.block_writes().items() if n > limits.block_writes}
        if over:
            block, n = max(over.items(), key=lambda kv: kv[1])
            found.append(f"blockIdx {block} made {n} global writes; the limit is {limits.block_writes} "
                         "per block")
    if limits.shared_memory and not any(s._allocations for s in _shared_arrays):
        found.append(NO_SHARED_MEMORY)
    return found


NO_SHARED_MEMORY = "the kernel never allocates shared memory (cuda.shared.array); this puzzle asks for it"


class _PoisoningNumpy:
    """numpy as the simulator's kernel API sees it, except that ``empty`` fills what it makes: shared and local
    arrays start as NaN (integers as their largest value), as the GPU's memory never reliably starts as zero.
    A kernel that reads memory no thread wrote is then wrong every time, not by chance."""

    def __getattr__(self, name: str):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=float, *args, **kwargs) -> np.ndarray:
        array = np.empty(shape, dtype, *args, **kwargs)
        if np.issubdtype(array.dtype, np.floating):
            array.fill(np.nan)
        elif np.issubdtype(array.dtype, np.integer):
            array.fill(np.iinfo(array.dtype).max)
        return array


def _track_shared_memory() -> None:
    """Note each launch's ``cuda.shared`` manager, whose allocations show whether shared memory was used, poison
    new shared and local arrays (`_PoisoningNumpy`), and make a block's shared allocation one array for all of
    its threads (`_one_array_per_line`). What is patched already is left as it is."""
    from numba.cuda.simulator import kernelapi

    kernelapi.np = _PoisoningNumpy()   # numpy as the simulator's kernel API module sees it
    shared = kernelapi.FakeCUDAShared
    if not getattr(shared.__init__, "noted", False):
        original = shared.__init__

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            _shared_arrays.append(self)

        init.noted = True
        shared.__init__ = init
    if not getattr(shared.array, "one_per_line", False):
        shared.array = _one_array_per_line(shared.array)


_allocating = threading.Lock()


def _one_array_per_line(simulators_array):
    """``FakeCUDAShared.array`` with its allocation made once for all of a block's threads. The simulator's own
    looks the array of the calling line up and, where there is none, makes and stores one: two of a block's threads
    (Python threads) between the lookup and the store each make an array, and those that got the one not kept write
    where the others never read, so an honest kernel read NaN on a busy worker. Here the lookup and the store are
    one step. The array is keyed as the simulator keys it (the caller's file and line: wrapping the method would
    make every caller this function); dynamic shared memory (``shape`` 0) and the alignment it refuses are the
    simulator's own."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or (isinstance(shape, int) and shape == 0):
            return simulators_array(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        line = (caller.f_code.co_filename, caller.f_lineno)
        with _allocating:
            made = self._allocations.get(line)
            if made is None:
                made = self._allocations[line] = _PoisoningNumpy.empty(shape, dtype)
        return made

    array.one_per_line = True
    return array


_SIMULATOR_THREAD = re.compile(r"^tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]")


def _describe(exc: BaseException) -> str:
    """``IndexError: threadIdx (1, 2, 0) of blockIdx (0, 0, 0): ...``: the simulator's ``tid=[1, 2, 0]
    ctaid=[0, 0, 0]`` prefix in CUDA's words."""
    text = _SIMULATOR_THREAD.sub(lambda m: "threadIdx ({}, {}, {}) of blockIdx ({}, {}, {})".format(*m.groups()),
                                 str(exc))
    return f"{type(exc).__name__}: {text}"
