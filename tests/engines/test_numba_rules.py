"""Every puzzle-grading rule pinned at its edge, on the simulator: a kernel exactly at a limit passes, one
access past it fails, with the message the student reads.

The kernels are made from the rule, not written out per count: the reference cells (which use their whole
budget) padded with extra accesses, or small templates whose access counts are parameters. Most tests grade
in this process through the grading child's own entry point (`child.handle`); the student-facing tests go
through `grade.check`, `grade.grade_correctness` and `grade.grade_limits`, each in a real child process.
"""
import ast
import math
import re

import numpy as np
import pytest

from graders.numba_engine import catalogue, child
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.grade import PuzzleFailed, check, grade_correctness, grade_limits
from graders.numba_engine.kernel_source import SubmittedKernel
from graders.numba_engine.puzzle import Case, Puzzle
from graders.numba_engine.traced_array import AccessLog, TracedArray
from graders.result import GradeResult, Status
from puzzle_cells import REFERENCE, run_cells
from workshop.cells import strip_solution_markers

SEED = 5
PUZZLES = catalogue.PUZZLES
BLOCK_WRITE_PUZZLES = [p for p in PUZZLES if p.limits.block_writes is not None]
SHARED_MISSING = ("the kernel never allocates shared memory (cuda.shared.array); this puzzle asks for it")


def puzzle_ids(puzzle: Puzzle) -> str:
    return puzzle.id


@pytest.fixture(autouse=True)
def restore_simulator(monkeypatch):
    """`child.handle` wraps the simulator's shared-memory manager to see allocations and poisons its numpy: undone
    after each test."""
    from numba.cuda.simulator import kernelapi
    monkeypatch.setattr(kernelapi.FakeCUDAShared, "__init__", kernelapi.FakeCUDAShared.__init__)
    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", kernelapi.FakeCUDAShared.array)
    monkeypatch.setattr(kernelapi, "np", kernelapi.np)


def grade(puzzle: Puzzle, cell: str, seed: int = SEED) -> GradeResult:
    """Grade the kernel of ``cell`` on the puzzle's hidden cases, as the grading child does."""
    source = kernel_source_from_cell(strip_solution_markers(cell), puzzle.kernel_name)
    return GradeResult.from_dict(child.handle({
        "puzzle": puzzle.id, "source": source, "kernel_name": puzzle.kernel_name, "mode": "hidden",
        "seed": seed, "target": "sim"}))


def submitted(puzzle: Puzzle, cell: str) -> SubmittedKernel:
    """The kernel of ``cell`` as the trusted grader passes it to the hidden tests."""
    return SubmittedKernel(kernel_source_from_cell(cell, puzzle.kernel_name), puzzle.kernel_name)


def over_limits(puzzle: Puzzle, parts: list[list[str]], mode: str = "hidden", shared_missing: bool = False) -> str:
    """The message of a kernel over the access limits: ``parts[k]``, what case k + 1 of the ``mode`` cases was over
    (if anything), after the case's number and launch; then the missing shared memory, once."""
    cases = puzzle.cases(mode)
    assert len(parts) == len(cases)
    clauses = [f"case {n} of {len(cases)} ({case.describe(parameters(puzzle))}): " + "; ".join(found)
               for n, (case, found) in enumerate(zip(cases, parts), 1) if found]
    return "; ".join(clauses + [SHARED_MISSING] * shared_missing)


def at_solution(cell: str, code: str) -> str:
    """``cell`` with ``code`` run first in the solution, at the indentation of ``### BEGIN SOLUTION``."""
    head, marker, tail = cell.partition("### BEGIN SOLUTION\n")
    assert marker, "the reference cell has no solution block"
    indent = head[head.rindex("\n") + 1:]
    return head + marker + "".join(indent + line + "\n" for line in code.splitlines()) + tail


def padded(puzzle: Puzzle, reads: int = 0, writes: int = 0) -> str:
    """The reference cell, whose thread 0 of block 0 first makes ``reads`` more global reads (of a's first
    element) and ``writes`` more global writes (0 into out's first element, which it then overwrites)."""
    case = puzzle.cases("hidden")[0]
    a0, out0 = (", ".join("0" * len(shape)) for shape in (case.inputs[0], case.out))
    return at_solution(REFERENCE[puzzle.id], (
        "if cuda.blockIdx.x + cuda.blockIdx.y + cuda.threadIdx.x + cuda.threadIdx.y == 0:\n"
        f"    for rep in range({reads}):\n"
        f"        padding = a[{a0}]\n"
        f"    for rep in range({writes}):\n"
        f"        out[{out0}] = 0.0\n"))


def thread_over(what: str, made: int, limit: int, threads: int = 1, who: str = "(0, 0, 0)",
                block: str = "(0, 0, 0)") -> str:
    return (f"threadIdx {who} of blockIdx {block} made {made} global {what}; the limit is {limit} per thread "
            f"({threads} thread(s) over it)")


def any_thread(message: str) -> str:
    """``message`` with each thread and block it names replaced by ``?``: which of several threads over a
    limit is named depends on the simulator's scheduling."""
    return re.sub(r"threadIdx \(\d+, \d+, \d+\) of blockIdx \(\d+, \d+, \d+\)", "threadIdx ? of blockIdx ?", message)


def parameters(puzzle: Puzzle) -> list[str]:
    """The reference kernel's parameter names: how a failure message names the launch's arguments."""
    kernel = next(node for node in ast.walk(ast.parse(strip_solution_markers(REFERENCE[puzzle.id])))
                  if isinstance(node, ast.FunctionDef) and node.name == puzzle.kernel_name)
    return [a.arg for a in kernel.args.args]


def block_over(made: int, limit: int) -> str:
    return f"blockIdx (0, 0, 0) made {made} global writes; the limit is {limit} per block"


def hidden_inputs(puzzle: Puzzle, seed: int = SEED) -> tuple[Case, list[np.ndarray]]:
    """The first hidden case and the inputs the grader draws for it from ``seed``."""
    case = puzzle.cases("hidden")[0]
    return case, puzzle.make_inputs(case, np.random.default_rng(seed))


# --- per-thread reads and writes ------------------------------------------------------------------------

def reference_thread0(puzzle: Puzzle, case: Case) -> tuple[int, int]:
    """Global (reads, writes) of thread 0 of block 0 of the reference kernel in ``case``, counted as the
    grader counts them."""
    kernel = run_cells(REFERENCE[puzzle.id])[puzzle.kernel_name]
    log = AccessLog()
    arrays = [np.zeros(shape, np.float32) for shape in (case.out, *case.inputs)]
    kernel[case.blocks, case.threads](*(TracedArray("array", x, log) for x in arrays), *case.scalars)
    thread0 = ((0, 0, 0), (0, 0, 0))
    return log.reads[thread0], log.writes[thread0]


@pytest.mark.parametrize("puzzle", PUZZLES, ids=puzzle_ids)
def test_reference_is_at_its_read_and_write_limits_and_one_access_more_is_over(puzzle):
    """Thread 0 of block 0 of each reference uses its whole budget in some hidden case (matmul's read limit
    changes with the case): one read or one write more in that thread is over, in each case where it was at
    the limit, and the message says so case by case."""
    cases = puzzle.cases("hidden")
    used = [reference_thread0(puzzle, c) for c in cases]
    read_limits = [puzzle.limits.max_reads(c) for c in cases]
    write_limit, block_limit = puzzle.limits.writes, puzzle.limits.block_writes
    assert all(r <= limit for (r, _), limit in zip(used, read_limits))
    assert any(r == limit for (r, _), limit in zip(used, read_limits))
    assert all(w == write_limit for _, w in used)
    assert grade(puzzle, padded(puzzle)).ok

    run = grade(puzzle, padded(puzzle, reads=1))
    assert run.status == Status.LIMITS and run.cases == len(cases)
    assert run.message == over_limits(puzzle, [[thread_over("reads", r + 1, limit)] if r == limit else []
                                               for (r, _), limit in zip(used, read_limits)])

    run = grade(puzzle, padded(puzzle, writes=1))
    parts = [thread_over("writes", write_limit + 1, write_limit)]
    if block_limit is not None:
        parts.append(block_over(block_limit + 1, block_limit))
    assert run.status == Status.LIMITS and run.message == over_limits(puzzle, [parts] * len(cases))


def test_a_read_limit_that_changes_with_the_case_is_reached_in_every_case():
    """Matmul's read limit counts tiles, and its reference reaches it in every hidden case: the test above
    pins each case's own limit."""
    matmul = catalogue.get("matmul")
    cases = matmul.cases("hidden")
    limits = [matmul.limits.max_reads(c) for c in cases]
    assert len(set(limits)) > 1
    assert [reference_thread0(matmul, c)[0] for c in cases] == limits


EVERY_THREAD = {   # correct kernels whose every thread with a position makes `reads` reads and `writes` writes
    "blocks": """
@cuda.jit
def blocks_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < size:
        value = 0.0
        for rep in range({reads}):
            value = a[i] + 10
        for rep in range({writes}):
            out[i] = value
""",
    "blocks2d": """
@cuda.jit
def blocks2d_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < size and j < size:
        value = 0.0
        for rep in range({reads}):
            value = a[i, j] + 10
        for rep in range({writes}):
            out[i, j] = value
""",
}


@pytest.mark.parametrize("what", ["reads", "writes"])
@pytest.mark.parametrize("puzzle_id", list(EVERY_THREAD))
def test_every_thread_at_its_limit_passes_and_one_more_access_each_fails(puzzle_id, what):
    """Counts are per thread, over several blocks: all threads at the limit pass, all one over fail."""
    puzzle = catalogue.get(puzzle_id)
    counts = {"reads": puzzle.limits.reads, "writes": puzzle.limits.writes}
    limit = counts[what]
    assert grade(puzzle, EVERY_THREAD[puzzle_id].format(**counts)).ok

    run = grade(puzzle, EVERY_THREAD[puzzle_id].format(**counts | {what: limit + 1}))
    assert run.status == Status.LIMITS
    assert any_thread(run.message) == over_limits(puzzle, [
        [thread_over(what, limit + 1, limit, threads=math.prod(c.out), who="?", block="?")]
        for c in puzzle.cases("hidden")])


# --- per-block writes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("puzzle", BLOCK_WRITE_PUZZLES, ids=puzzle_ids)
def test_block_at_its_write_limit_passes_and_one_write_more_fails(puzzle):
    """The reference's thread 0 writes the block's result; letting threads 0..k-1 all write it (one write
    each, within the per-thread limit) makes k writes per block."""
    reference = REFERENCE[puzzle.id]
    assert reference.count("if local_i == 0:") == 1
    limit = puzzle.limits.block_writes

    def writers(k: int) -> str:
        return reference.replace("if local_i == 0:", f"if local_i < {k}:")

    assert grade(puzzle, writers(limit)).ok
    run = grade(puzzle, writers(limit + 1))
    assert run.status == Status.LIMITS
    assert run.message == over_limits(puzzle, [[block_over(limit + 1, limit)]] * len(puzzle.cases("hidden")))


# --- shared memory --------------------------------------------------------------------------------------

WITHOUT_SHARED = """
@cuda.jit
def {name}(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < size:
        out[i] = a[i] + 10
"""


@pytest.mark.parametrize("puzzle_id", ["shared", "blocks"])
def test_shared_memory_is_required_only_where_the_puzzle_asks_for_it(puzzle_id):
    """Shared and Blocks ask for the same result with the same geometry; only Shared requires shared memory."""
    puzzle = catalogue.get(puzzle_id)
    run = grade(puzzle, WITHOUT_SHARED.format(name=puzzle.kernel_name))
    if not puzzle.limits.shared_memory:
        assert run.ok, run.failure_line()
        return
    assert run.status == Status.LIMITS
    assert run.message == SHARED_MISSING   # once, not once per case
    assert grade(puzzle, REFERENCE[puzzle.id]).ok


# --- what a kernel prints -------------------------------------------------------------------------------

DEVICE_FUNCTIONS = """@cuda.jit(device=True)
def peek(a):
    return a[0]


@cuda.jit(device=True)
def shout(a):
    print(a[1])
    return a[0]


"""
PRINTED = {   # a print(...) by thread 0 of block 0 of Pooling's reference: (code, its global reads, its writes)
    "a read": ("print(a[0])", 1, 0),
    "a walrus": ("print((kept := a[0]))", 1, 0),
    "an f-string": ("print(f'{a[0]} {a[1]}')", 2, 0),
    "a device function": ("print(peek(a))", 1, 0),
    "an atomic": ("print(cuda.atomic.add(out, 0, 0.0))", 2, 1),   # the simulator's atomic: read, read, write
    "a device function that prints too": ("print(shout(a))", 2, 0),
}


def printed_over(what: str, made: int, limit: int, printed: int) -> str:
    return thread_over(what, made, limit).replace(
        f"global {what};", f"global {what} ({printed} of them inside print(...), which count like any other);")


@pytest.mark.parametrize("form", list(PRINTED))
def test_accesses_inside_print_count_like_any_other_and_the_message_says_so(form):
    """Reads, device-function calls and atomics moved into a print's arguments are counted: Pooling's reference
    at its limits plus one print of a global value is over them, in every hidden case."""
    pooling = catalogue.get("pooling")
    code, reads, writes = PRINTED[form]
    first_thread = "if cuda.blockIdx.x + cuda.threadIdx.x == 0:\n    "
    cell = DEVICE_FUNCTIONS + at_solution(REFERENCE["pooling"], first_thread + code)
    run = grade(pooling, cell)
    parts = [printed_over("reads", 1 + reads, 1, reads)]
    if writes:
        parts.append(printed_over("writes", 1 + writes, 1, writes))
    assert run.status == Status.LIMITS
    assert run.message == over_limits(pooling, [parts] * len(pooling.cases("hidden")))


def test_printing_a_thread_index_or_a_local_value_is_no_access():
    pooling = catalogue.get("pooling")
    cell = at_solution(REFERENCE["pooling"], "print('thread', local_i, 'of block', cuda.blockIdx.x, i, size)")
    cell = cell.replace("        out[i] = total\n", "        print(i, total)\n        out[i] = total\n")
    assert "print(i, total)" in cell
    assert grade(pooling, cell).ok


# --- outputs start poisoned -----------------------------------------------------------------------------

def test_an_output_left_unwritten_fails_even_where_zero_is_expected():
    """Outputs start as NaN, not 0: a zip kernel that skips the positions whose sum is 0 is wrong."""
    zip_ = catalogue.get("zip")
    seed = next(s for s in range(1000) if 0 in zip_.expected(*hidden_inputs(zip_, s)))
    case, inputs = hidden_inputs(zip_, seed)
    zeros = np.flatnonzero(zip_.expected(case, inputs) == 0)
    run = grade(zip_, """
@cuda.jit
def zip_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    total = a[i] + b[i]
    if total != 0:
        out[i] = total
""", seed=seed)
    assert run.status == Status.INCORRECT and run.case == "case 1 of 3"
    assert run.message == (f"{case.describe(parameters(zip_))}: out[{zeros[0]}] is NaN, expected 0: never written, "
                           "or computed from memory nothing wrote, which the grader fills with NaN "
                           f"({len(zeros)} of {case.out[0]} positions NaN)")


@pytest.mark.parametrize("puzzle", PUZZLES, ids=puzzle_ids)
def test_every_hidden_case_is_graded(puzzle):
    """A reference that writes nothing at the last hidden size fails there, and only there."""
    cases = puzzle.cases("hidden")
    last = cases[-1].scalars[0]
    assert last not in [c.scalars[0] for c in cases[:-1]]
    kernel = next(node for node in ast.walk(ast.parse(strip_solution_markers(REFERENCE[puzzle.id])))
                  if isinstance(node, ast.FunctionDef))
    scalar = kernel.args.args[1 + len(cases[-1].inputs)].arg
    run = grade(puzzle, at_solution(REFERENCE[puzzle.id], f"if {scalar} == {last}:\n    return\n"))
    assert run.status == Status.INCORRECT and run.case == f"case {len(cases)} of {len(cases)}"
    n = math.prod(cases[-1].out)
    assert re.fullmatch(re.escape(cases[-1].describe(parameters(puzzle))) + r": out\[.+\] is NaN, expected -?\d+: "
                        rf"never written, .* \({n} of {n} positions NaN\)", run.message), run.message


# --- exact values ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("position, error", [("0", 1.0), ("size - 1", 1.0), ("size - 1", 0.01)],
                         ids=["first+1", "last+1", "last+0.01"])
def test_one_output_off_by_a_little_fails(position, error):
    """Inputs are small integers, so outputs are exact: one value off by 1 (or 0.01) is wrong."""
    map_ = catalogue.get("map")
    run = grade(map_, f"""
@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    out[i] = a[i] + 10 + ({error} if i == {position} else 0.0)
""")
    case, (a,) = hidden_inputs(map_)
    k = 0 if position == "0" else case.out[0] - 1
    expected = a[k] + 10
    got = np.float32(expected + np.float32(error))
    assert run.status == Status.INCORRECT and run.case == "case 1 of 3"
    assert run.message == (f"{case.describe(parameters(map_))}: out[{k}] = {got:g}, expected {expected:g} "
                           f"(1 of {case.out[0]} positions wrong)")


# --- guards and hidden sizes ----------------------------------------------------------------------------

GUARDS = {   # blocks of 4 threads over `size` positions
    "guarded": "if i < size:\n        out[i] = a[i] + 10",
    "read unguarded": "value = a[i] + 10\n    if i < size:\n        out[i] = value",
    "write unguarded": "out[i] = a[i] + 10 if i < size else 0.0",
}


@pytest.mark.parametrize("body", list(GUARDS))
def test_a_kernel_without_a_bounds_guard_fails_where_the_size_is_not_a_multiple_of_the_block(body):
    blocks = catalogue.get("blocks")
    run = grade(blocks, f"""
@cuda.jit
def blocks_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    {GUARDS[body]}
""")
    if body == "guarded":
        assert run.ok, run.failure_line()
        return
    case = blocks.cases("hidden")[0]
    assert case.out[0] % case.threads[0] != 0
    action = "read of a" if body == "read unguarded" else "write to out"
    assert run.status == Status.KERNEL_ERROR and run.case == "case 1 of 3"
    assert re.fullmatch(re.escape(case.describe(parameters(blocks))) + r": the kernel failed: IndexError: "
                        r"threadIdx \(\d+, 0, 0\) of blockIdx \(\d+, 0, 0\): out-of-bounds "
                        + action + r"\[\d+\] \(shape \(9,\)\)", run.message), run.message


def spare_threads(case: Case) -> bool:
    """Whether the launch has more threads than its largest array has elements: some must do nothing."""
    threads = math.prod(case.blocks) * math.prod(case.threads)
    return threads > max(math.prod(shape) for shape in (*case.inputs, case.out))


@pytest.mark.parametrize("puzzle", PUZZLES, ids=puzzle_ids)
def test_hidden_sizes_go_off_the_block_size_wherever_the_block_is_fixed(puzzle):
    """A puzzle whose block does not grow with the size has a hidden size that is not a multiple of it; one
    whose block is sized to the data (one thread per position) has no spare thread at all."""
    hidden = puzzle.cases("hidden")
    if len({c.threads for c in hidden}) == 1:
        assert any(spare_threads(c) for c in hidden), [c.describe() for c in hidden]
    else:
        assert not any(spare_threads(c) for c in hidden)


@pytest.mark.parametrize("puzzle", PUZZLES, ids=puzzle_ids)
def test_hidden_cases_are_the_public_ones_and_more(puzzle):
    assert set(puzzle.cases("public")) < set(puzzle.cases("hidden"))


# --- what the student reads -----------------------------------------------------------------------------

def test_wrong_kernel_is_reported_wrong_not_over_the_limits(monkeypatch, capsys):
    """Limits are counted only once the outputs are right: a wrong kernel over them is reported wrong."""
    monkeypatch.setenv("WORKSHOP_SEED", str(SEED))
    map_ = catalogue.get("map")
    cell = ("@cuda.jit\ndef map_kernel(out, a, size):\n"
            "    i = cuda.threadIdx.x\n    out[i] = a[i] + a[i] + 10\n")   # wrong, and two reads a thread
    run = grade(map_, cell)
    assert run.status == Status.INCORRECT and "over the access limits" not in run.message
    kernel = submitted(map_, cell)
    with pytest.raises(PuzzleFailed, match=re.escape(
            f"Map: access limits are graded once the kernel is correct: case 1 of 3 (hidden, seed {SEED}): "
            f"{map_.cases('hidden')[0].describe(parameters(map_))}: out[")):
        grade_limits("map", kernel)
    check("map", kernel)
    printed = capsys.readouterr().out
    assert printed.startswith("✗ Map: case 1 of 1 (public): ") and "access limits" not in printed


def test_correct_kernel_over_the_limits_passes_correctness_and_fails_limits(monkeypatch, capsys):
    monkeypatch.setenv("WORKSHOP_SEED", str(SEED))
    blocks = catalogue.get("blocks")
    kernel = submitted(blocks, EVERY_THREAD["blocks"].format(reads=2, writes=1))
    grade_correctness("blocks", kernel)
    assert capsys.readouterr().out == "Blocks: correct on 3 hidden cases, run on the simulator\n"
    with pytest.raises(PuzzleFailed) as failed:
        grade_limits("blocks", kernel)
    assert any_thread(str(failed.value)) == f"Blocks: access limits (hidden, seed {SEED}): " + over_limits(blocks, [
        [thread_over("reads", 2, 1, threads=c.out[0], who="?", block="?")] for c in blocks.cases("hidden")])
    check("blocks", kernel)
    assert any_thread(capsys.readouterr().out).splitlines() == [
        "✓ Blocks: correct on the 1 public case(s) (the simulator)",
        "✗ access limits (public): " + over_limits(
            blocks, [[thread_over("reads", 2, 1, threads=9, who="?", block="?")]], mode="public")]


def test_missing_shared_memory_is_named_by_the_hidden_test(monkeypatch):
    """The same rule as above, through a grading child of its own (which tracks shared memory itself)."""
    monkeypatch.setenv("WORKSHOP_SEED", str(SEED))
    kernel = submitted(catalogue.get("shared"), WITHOUT_SHARED.format(name="shared_kernel"))
    with pytest.raises(PuzzleFailed, match=re.escape(
            f"Shared: access limits (hidden, seed {SEED}): {SHARED_MISSING}")):
        grade_limits("shared", kernel)


@pytest.mark.parametrize("puzzle_id, limits", [
    ("map", "at most 1 global read(s) and 1 global write(s) per thread"),
    ("dot", "at most 2 global read(s) and 1 global write(s) per thread; 1 global write(s) per block; "
            "shared memory used"),
    ("matmul", "reads as stated and 1 global write(s) per thread; shared memory used"),
], ids=["map", "dot", "matmul"])
def test_kernel_within_the_limits_is_told_which_limits_it_met(puzzle_id, limits, capsys):
    puzzle = catalogue.get(puzzle_id)
    kernel = submitted(puzzle, strip_solution_markers(REFERENCE[puzzle_id]))
    grade_limits(puzzle_id, kernel)
    assert capsys.readouterr().out == f"{puzzle.title}: within the access limits ({limits})\n"
    check(puzzle_id, kernel)
    assert capsys.readouterr().out.splitlines() == [
        f"✓ {puzzle.title}: correct on the {len(puzzle.cases('public'))} public case(s) (the simulator)",
        f"✓ access limits: {limits}", "  Hidden tests use fresh random inputs and more sizes."]


def test_a_wrong_element_of_a_2d_output_is_named_as_the_student_indexes_it():
    from graders.numba_engine.child import _compare
    expected = np.zeros((2, 3))
    out = expected.copy()
    out[1, 2] = 5
    assert _compare(out, expected).startswith("out[1, 2] = 5, expected 0")
    out[0, 1] = np.nan
    assert _compare(out, expected).startswith("out[0, 1] is NaN, expected 0: never written")
