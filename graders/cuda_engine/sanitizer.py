"""compute-sanitizer as a grader: a CUDA kernel that races in shared memory, reads memory it never wrote, or
accesses memory outside its buffers loses its correctness points, with the sanitizer's own line.

`sanitize` launches the kernel once under each tool (``memcheck``, ``racecheck``, ``initcheck`` by default; a spec's
``sanitizer_tools`` may add ``synccheck`` or leave some out), each in its own sandboxed child
(`graders.cuda_engine.launch_child`) wrapped in compute-sanitizer (`run_tool`); `findings` reads its report. The
launch is at `sanitize_shape`: the spec's ``sanitize_shape``, else `public_shape`, a small check shape of the kernel
(the tools slow a kernel down by orders of magnitude) that still spans two blocks.

`sanitize_together` checks several kernels of one submission, with the same findings, paying each tool's child start
once: one child per tool launches every kernel of its batch in turn. A batch clears a kernel only when its run
finished, launched that kernel and its report counts no error at all; any other kernel runs under that tool alone,
as `sanitize` runs it, so that a finding is always of one kernel's own run.

`crash_report` is memcheck's report of a kernel that crashed, at the check shape where it did, compiled with its
source lines (a spec's ``explain_crash``): the access that faulted and the line it is on.

`check` is a kernel's check cell where the track has one of this kind (the debugging track): on a GPU it runs
the kernel under the same tools, sandboxed the same way, at `public_shape`, and prints each tool's finding;
without a GPU it says so.

On a GPU worker compute-sanitizer is required (found by `graders.cuda_engine.sass.find_tool`:
``WORKSHOP_COMPUTE_SANITIZER``, else ``PATH``, else the CUDA toolkit); without it grading stops with
`SanitizerMissing`. ``WORKSHOP_SANITIZE=off`` skips it (trusted local use).
"""
from __future__ import annotations

import math
import re
import time
from concurrent.futures import ThreadPoolExecutor

from graders.cuda_engine.problems import Shape, problem
from graders.cuda_engine.sass import find_tool
from graders.cuda_engine.spec import DEFAULT_SANITIZER_TOOLS, Geometry, KernelSpec
from graders.gpu import NeedsGPUWorker
from graders.sandbox.run import run_child
from graders.sandbox.starvation import refuse_starved

TOOLS = DEFAULT_SANITIZER_TOOLS
CHILD = "graders.cuda_engine.launch_child"
TIMEOUT_S = 180.0    # one tool's run: CUDA start under the tool, compile, one slowed-down launch
BATCH_KERNEL_S = 10.0   # a batch's limit beyond one run's, per kernel in it: its compile and slowed-down launch
ALONE_AT_ONCE = 4    # runs alone at once, per tool, after a batch that did not clear its kernels
RACECHECK_PRINT_LIMIT = 5    # hazards racecheck prints (`tool_wrapper`)
_ERRORS = re.compile(r"^=+ ERROR SUMMARY: (\d+) errors?", re.MULTILINE)
_RACES = re.compile(r"^=+ RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?", re.MULTILINE)
_FINDING = re.compile(r"^=+ ((?:Error: )?(?:Race reported|Invalid|Uninitialized|Out of bounds|Misaligned|"
                      r"Barrier error)[^\n]*)", re.MULTILINE)


class SanitizerMissing(NeedsGPUWorker):
    """This GPU worker has no compute-sanitizer: it cannot grade CUDA kernels completely."""


def sanitize_shape(kernel: KernelSpec, geometry: Geometry) -> Shape:
    """Where the grader runs the tools: the spec's ``sanitize_shape``, else `public_shape`."""
    return kernel.sanitize_shape or public_shape(kernel, geometry)


def public_shape(kernel: KernelSpec, geometry: Geometry) -> Shape:
    """The smallest check shape whose grid has two blocks or more (else the largest check shape)."""
    definition = problem(kernel.kind)
    shapes = sorted(kernel.check_shapes, key=math.prod)
    several = [s for s in shapes if math.prod(definition.grid(s, geometry.tile)) >= 2]
    return several[0] if several else shapes[-1]


class SanitizerFailed(RuntimeError):
    """A tool's run did not finish: the grader's problem (the kernel passed the same launch without it)."""


def findings(tool: str, report: str) -> str:
    """'' if compute-sanitizer's ``report`` counts no error, else the count and its first finding, in its words.

    Racecheck's warnings (hazards it does not call errors) do not count. A report without the tool's summary
    line raises `SanitizerFailed`: the tool did not check the launch, which must not pass as clean. Text the
    kernel printed itself can only add counts, never remove the tool's: the largest count is taken."""
    counts = [int(n) for n in _ERRORS.findall(report) + _RACES.findall(report)]
    if not counts:
        raise SanitizerFailed(f"compute-sanitizer --tool {tool} printed no summary: {report[-500:]!r}")
    if not max(counts):
        return ""
    first = _FINDING.search(report)
    line = first.group(1).strip() if first else "see the sanitizer's report"
    return f"compute-sanitizer --tool {tool} found {max(counts)} error(s); the first: {line}"


_BLOCK_LINE = re.compile(r"^=+ {4,}(\S.*)$")   # a line inside a finding's block: where, which thread, the address


def first_block(report: str) -> list[str]:
    """memcheck's first finding and the lines of its block (where it is, which thread, the address), in its words,
    without the host backtrace; [] for a report without one."""
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if _FINDING.match(line)), None)
    if start is None:
        return []
    block = [_FINDING.match(lines[start]).group(1).strip()]
    for line in lines[start + 1:]:
        inside = _BLOCK_LINE.match(line)
        if not inside or inside.group(1).startswith("Saved host backtrace"):
            break
        block.append(inside.group(1).strip())
    return block[:6]


def crash_report(request: dict, kernel: KernelSpec, env: dict[str, str], shape: Shape) -> list[str]:
    """The kernel of ``request`` launched once at ``shape`` under memcheck, compiled with its source lines: the
    first block of memcheck's report (`first_block`), [] when it reports none. The launch is expected to fail (the
    kernel crashed there): its child's end is not the grader's problem. Raises `SanitizerMissing` without
    compute-sanitizer and `graders.sandbox.starvation.WorkerStarved` when the worker starved the run."""
    run = run_child(CHILD, request | {"shape": list(shape), "lineinfo": True}, timeout_s=TIMEOUT_S, gpu=True,
                    wrapper=tool_wrapper("memcheck", kernel.function), env=env)
    refuse_starved(run, TIMEOUT_S)
    return first_block(run.stdout)


def tool_wrapper(tool: str, kernel_name: str | tuple[str, ...] | None = None) -> tuple[str, ...]:
    """compute-sanitizer's command line around a child for ``tool``: ``kernel_name`` (one name or several) limits
    memcheck, racecheck and synccheck to kernels whose name contains it, or one of them: a ``--kernel-name
    kns=NAME`` filter each (compute-sanitizer checks a kernel that matches at least one of its filters, its
    ``--help`` says; substrings keep a batch's filter the same as each kernel's own, where one ``regex`` key would
    need escaping). initcheck watches every kernel, since it knows memory as written only when it saw the
    write: the grader's own kernels fill the inputs and poison the output. Errors of host API calls are not the
    kernel's and are not reported; the tool never fails the run itself. A memcheck, initcheck or synccheck finding
    carries a host backtrace of about 2 KiB, so one is printed (its summary still counts them all) and it stays
    within the 4 KiB of output kept (`graders.sandbox.capped_output`); racecheck's hazards are a few lines each, and
    its first shown may be a warning, so it prints `RACECHECK_PRINT_LIMIT`.
    Raises `SanitizerMissing` without compute-sanitizer."""
    names = (kernel_name,) if isinstance(kernel_name, str) else kernel_name or ()
    watched = tuple(part for name in names for part in ("--kernel-name", f"kns={name}")) if tool != "initcheck" else ()
    limit = RACECHECK_PRINT_LIMIT if tool == "racecheck" else 1
    return (str(tool_binary()), "--tool", tool, *watched, "--report-api-errors", "no", "--print-limit", str(limit),
            "--error-exitcode", "0")


def tool_binary():
    """compute-sanitizer's path, or `SanitizerMissing`."""
    binary = find_tool("compute-sanitizer")
    if binary is None:
        raise SanitizerMissing("compute-sanitizer was not found on this GPU worker: install the CUDA toolkit's "
                               "compute-sanitizer or set WORKSHOP_COMPUTE_SANITIZER (WORKSHOP_SANITIZE=off skips "
                               "it, for trusted local use only)")
    return binary


def run_tool(tool: str, child: str, request: dict, env: dict[str, str], kernel_name: str | None = None,
             timeout_s: float = TIMEOUT_S) -> str:
    """Run the grading child ``child`` on ``request`` once under ``tool`` (`tool_wrapper`, ``kernel_name``
    watched) for at most ``timeout_s``: '' or its finding (`findings`).

    Raises `SanitizerMissing` without compute-sanitizer, `SanitizerFailed` when the run does not finish, and
    `graders.sandbox.starvation.WorkerStarved` when it did not because the worker starved it."""
    run = run_child(child, request, timeout_s=timeout_s, gpu=True, wrapper=tool_wrapper(tool, kernel_name), env=env)
    refuse_starved(run, timeout_s)
    if not run.ok or "error" in run.answer:
        raise SanitizerFailed(f"compute-sanitizer --tool {tool} did not finish ({run.status}: "
                              f"{run.message or run.answer.get('error', '')}) {run.stdout[-500:]}")
    return findings(tool, run.stdout)


def sanitize(request: dict, kernel: KernelSpec, geometry: Geometry, env: dict[str, str],
             tools=TOOLS, shape: Shape | None = None, timeout_s: float = TIMEOUT_S) -> dict:
    """Run the kernel of ``request`` (the grading child's request) once under each tool at ``shape`` (default:
    `sanitize_shape`), the tools' children side by side (nothing is timed meanwhile), each for at most
    ``timeout_s``.

    ``{"shape": ..., "tools": {tool: finding or ''}, "failure": the first finding (in ``tools``' order) or '',
    "seconds": {tool: its run's wall seconds}}``.
    Raises `SanitizerMissing` without compute-sanitizer, `SanitizerFailed` when a tool's run does not finish."""
    tool_binary()
    shape = shape or sanitize_shape(kernel, geometry)
    launch = request | {"shape": list(shape)}
    def timed(tool: str) -> tuple[str, float]:
        started = time.monotonic()
        finding = run_tool(tool, CHILD, launch, env, kernel.function, timeout_s)
        return finding, round(time.monotonic() - started, 3)

    with ThreadPoolExecutor(max_workers=max(len(tools), 1)) as pool:
        runs = dict(zip(tools, pool.map(timed, tools)))
    found = {tool: finding for tool, (finding, _) in runs.items()}
    return {"shape": list(shape), "tools": found, "failure": _first(found),
            "seconds": {tool: seconds for tool, (_, seconds) in runs.items()}}


def sanitize_together(launches: list[tuple[dict, KernelSpec, Geometry]], env: dict[str, str],
                      timeout_s: float = TIMEOUT_S) -> list[dict | Exception]:
    """Each launch of ``launches`` (a kernel's request, spec and geometry, all of one submission) checked by each of
    its spec's tools at its `sanitize_shape`, as `sanitize` checks it, in `sanitize`'s answer with ``"batched":
    {tool: n}`` for each tool whose batch of n kernels cleared it; or the exception (`SanitizerFailed`,
    `graders.sandbox.starvation.WorkerStarved`) that a run of it alone raised.

    One child per tool, the tools' children side by side, launches every kernel whose spec names the tool, in
    order, watching all of them (`tool_wrapper`), for at most ``timeout_s`` and `BATCH_KERNEL_S` a kernel. A batch
    that did not finish (killed, timed out, starved), reports no summary or any error, or did not launch a kernel,
    clears none of them: each kernel it did not clear runs under the tool alone, as `sanitize` runs it, for at most
    ``timeout_s``, `ALONE_AT_ONCE` at a time. A kernel's ``seconds`` are those of the run that decided its finding.
    Raises `SanitizerMissing` without compute-sanitizer."""
    tool_binary()
    shaped = [request | {"shape": list(sanitize_shape(kernel, geometry))} for request, kernel, geometry in launches]
    tools = tuple(dict.fromkeys(tool for _, kernel, _ in launches for tool in kernel.sanitizer_tools))

    def checked(tool: str) -> dict[int, tuple[str | Exception, float, int]]:
        """By launch: (its finding or the exception of its run alone, that run's seconds, its batch's size or 1)."""
        members = [i for i, (_, kernel, _) in enumerate(launches) if tool in kernel.sanitizer_tools]
        started = time.monotonic()
        cleared = (_cleared(tool, [shaped[i] for i in members], tuple(launches[i][1].function for i in members), env,
                            timeout_s + BATCH_KERNEL_S * len(members)) if len(members) > 1 else [False])
        seconds = round(time.monotonic() - started, 3)
        found = {i: ("", seconds, len(members)) for i, clear in zip(members, cleared) if clear}

        def alone(i: int) -> tuple[int, str | Exception, float]:
            started = time.monotonic()
            try:
                finding = run_tool(tool, CHILD, shaped[i], env, launches[i][1].function, timeout_s)
            except Exception as exc:   # that kernel's own run did not finish: its preparation's failure
                finding = exc
            return i, finding, round(time.monotonic() - started, 3)

        redo = [i for i in members if i not in found]
        if redo:
            with ThreadPoolExecutor(min(len(redo), ALONE_AT_ONCE)) as pool:
                found |= {i: (finding, s, 1) for i, finding, s in pool.map(alone, redo)}
        return found

    with ThreadPoolExecutor(max(len(tools), 1)) as pool:
        runs = dict(zip(tools, pool.map(checked, tools)))
    answers: list[dict | Exception] = []
    for i, (_, kernel, _) in enumerate(launches):
        mine = {tool: runs[tool][i] for tool in kernel.sanitizer_tools}
        failed = next((finding for finding, _, _ in mine.values() if isinstance(finding, Exception)), None)
        found = {tool: finding for tool, (finding, _, _) in mine.items()}
        answers.append(failed or {"shape": shaped[i]["shape"], "tools": found, "failure": _first(found),
                                  "seconds": {tool: seconds for tool, (_, seconds, _) in mine.items()},
                                  "batched": {tool: n for tool, (_, _, n) in mine.items() if n > 1}})
    return answers


def _cleared(tool: str, requests: list[dict], functions: tuple[str, ...], env: dict[str, str],
             timeout_s: float) -> list[bool]:
    """Whether one child under ``tool`` (`tool_wrapper`, watching ``functions``) that launches ``requests`` in turn
    clears each: the run finished, its report counts no error (`findings`), and it launched that request at its
    shape. All False where the run did not finish or its report counts an error or has no summary."""
    run = run_child(CHILD, {"launches": requests}, timeout_s=timeout_s, gpu=True, wrapper=tool_wrapper(tool, functions),
                    env=env)
    outcomes = run.answer.get("launches") if run.ok else None
    if not isinstance(outcomes, list) or len(outcomes) != len(requests):
        return [False] * len(requests)
    try:
        if findings(tool, run.stdout):
            return [False] * len(requests)
    except SanitizerFailed:
        return [False] * len(requests)
    return [isinstance(o, dict) and o.get("launched") == r["shape"] for o, r in zip(outcomes, requests)]


def for_tools(checked: dict, tools) -> dict:
    """``checked`` (`sanitize`'s answer) narrowed to ``tools``, each one of its own: their findings and seconds,
    the first of their findings its failure."""
    found = {tool: checked["tools"][tool] for tool in tools}
    return checked | {"tools": found, "failure": _first(found),
                      "seconds": {tool: checked["seconds"][tool] for tool in tools}}


def _first(found: dict[str, str]) -> str:
    return next((finding for finding in found.values() if finding), "")


def check(assignment: str, kernel_id: str, source: str) -> None:
    """A kernel's check cell where it is the sanitizer's: the kernel compiled as the grader compiles it (its
    resources, or the compiler's messages), then on a GPU each of the spec's tools run on it at `public_shape`,
    sandboxed as grading runs them, one line each; without a GPU, that they run on a GPU machine only. No CPU
    preview: the bugs this check is for are the ones a run shows. Never raises."""
    from graders.cuda_engine import grade   # grade imports this module
    from graders.cuda_engine.compile import CompileError
    from graders.cuda_engine.spec import load_spec
    from graders.gpu import detect_gpu
    from graders.result import hidden_seed
    from graders.sandbox.starvation import WorkerStarved

    try:
        grade.check_compiles(assignment, kernel_id, source)
    except CompileError as exc:
        print(f"✗ {kernel_id}: {exc}")
        return
    spec = load_spec(assignment)
    kernel = spec.kernel(kernel_id)
    if detect_gpu() is None:
        print(f"? {kernel_id}: no GPU here, so compute-sanitizer cannot run; your feedback shows what the grader's "
              f"tools ({', '.join(kernel.sanitizer_tools)}) found on the GPU worker")
        return
    shape = public_shape(kernel, kernel.geometry)
    request = {"spec_path": str(spec.path.resolve()), "kernel_id": kernel_id, "source": source, "seed": hidden_seed()}
    try:
        checked = sanitize(request, kernel, kernel.geometry, grade._child_env(), kernel.sanitizer_tools, shape)
    except (SanitizerMissing, SanitizerFailed, WorkerStarved) as exc:
        print(f"? {kernel_id}: the sanitizer did not finish: {exc}")
        return
    label = "x".join(map(str, shape))
    for tool, finding in checked["tools"].items():
        print(f"✗ {finding}" if finding else f"✓ compute-sanitizer --tool {tool}: no error at shape {label}")
