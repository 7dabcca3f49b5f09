"""The Triton engine without a GPU: a kernel read from its cell by parsing (graders/triton_engine/kernel_source.py,
and through graders/submission.py), the spec's launches, the grading child's bench driven by Triton's
interpreter on CPU tensors (the CUDA engine's `check_and_time` with a stand-in timer: each reference right and
timed, each known-wrong solution caught with a status its ``status:`` line allows), and the check cell's line
from a sandboxed child."""
from __future__ import annotations

import ast
import dataclasses
import linecache
import math
import re
from types import SimpleNamespace

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.utils import is_grade, is_solution

import graders.cuda_engine.timing
from graders import gpu, tracks
from graders.cuda_engine import child as cuda_child
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import SpecError
from graders.gpu import NeedsGPUWorker
from graders.hidden_tests import GRADED_OUTSIDE, HIDDEN_TESTS
from graders.result import Status
from graders.submission import Submission, SubmissionError, hidden_call
from graders.triton_engine import child, grade
from graders.triton_engine.kernel_source import (MAX_AUTOTUNE_CONFIGS, Autotune, AutotuneConfig, TritonKernel,
                                                 TritonSourceError, kernel_from_cell, kernel_from_function,
                                                 read_autotune, triton_kernel_in_cell)
from graders.triton_engine.spec import AUTOTUNE, ROW, Launch, load_triton_spec, resolve_launch
from workshop.submissions import cuda_answers, fill

TRACK = tracks.get("triton")
SPEC = load_triton_spec("triton")
REFERENCES = {kid: k.reference for kid, k in SPEC.assignment.kernels.items()}
SAMPLES = 3
TILE = ("BLOCK_SIZE_N", "BLOCK_SIZE_M")


def _interpretable(kid: str) -> bool:
    """Whether Triton's interpreter can check the kernel's kind (not a bf16 tl.dot)."""
    return not getattr(problem(SPEC.kernel(kid).kind, "triton"), "interpreter_gap", "")

CELL = '''import math

@triton.jit
def helper(x):
    return x * 2


@triton.jit
def twice_kernel(out_ptr, x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, helper(tl.load(x_ptr + offsets)))


def host(x):
    print(math.pi)


twice_launch = {"BLOCK_SIZE": 64}
'''


def _kid(path) -> str:
    return tracks.graded_kernel(path) if "wrong" in path.parts else next(k for k, r in REFERENCES.items() if r == path)


def _kernel(path) -> TritonKernel:
    return kernel_from_cell(path.read_text(), SPEC.kernel(_kid(path)).function)


def test_a_kernel_is_its_cells_triton_jit_functions_at_their_own_lines():
    kernel = kernel_from_cell(CELL, "twice_kernel")
    assert kernel.name == "twice_kernel" and not kernel.is_stub
    lines, cell = kernel.source.split("\n"), CELL.split("\n")
    kept = [i for i, line in enumerate(lines) if line]
    assert all(lines[i] == cell[i] for i in kept)   # each kept line where the cell has it
    assert "def helper" in kernel.source and "@triton.jit" in kernel.source
    assert "import math" not in kernel.source and "def host" not in kernel.source and "twice_launch" not in kernel.source
    assert triton_kernel_in_cell(CELL, "host") is None and triton_kernel_in_cell(CELL, "nothing") is None
    with pytest.raises(TritonSourceError, match="not a function decorated with @triton.jit"):
        kernel_from_cell(CELL, "host")
    with pytest.raises(TritonSourceError, match="does not parse"):
        kernel_from_cell("@triton.jit\ndef k(:\n", "k")


@pytest.mark.parametrize("cell, words", [
    ("@triton.jit\ndef k(x, y=__import__('os')):\n    pass\n", "line 2: a default value of k must be a literal"),
    ("@triton.jit\ndef k(x: __import__('os').system('true')):\n    pass\n", "line 2: k uses __import__"),
    ("@triton.jit\ndef k(x):\n    open('/etc/passwd')\n", "line 3: k uses open; a kernel may use its arguments"),
    ("@triton.jit\ndef k(x):\n    getattr(x, 'handle')\n", "line 3: k uses getattr"),
    ("@triton.jit\ndef k(x):\n    m = tl\n    m.core.builtins\n", "line 3: k uses tl itself"),
    ("@triton.jit\ndef h(x):\n    return x\n\n\n@triton.jit\ndef k(x):\n    h.fn(x)\n",
     "line 8: k uses h other than by calling it"),
    ("@triton.jit\ndef k(x):\n    x.__class__\n", "line 3: k uses the attribute __class__"),
    ("@triton.jit\ndef k(x):\n    import os\n", "line 3: Import is not Triton kernel code"),
    ("@triton.jit\ndef k(x):\n    f = lambda: 0\n", "line 3: Lambda is not Triton kernel code"),
], ids=["default", "annotation", "builtin", "getattr", "tl-alias", "jit-attribute", "dunder", "import", "lambda"])
def test_a_kernel_that_would_run_host_python_is_refused_when_read(cell, words):
    """Triton calls what a kernel's names lead to as it compiles: only kernel code is read."""
    with pytest.raises(TritonSourceError, match="not Triton kernel code: .*" + re.escape(words)):
        kernel_from_cell(cell, "k")


def _autotuned(configs: str, key: str = '["M"]', decorator: str = "") -> str:
    head = decorator or f"@triton.autotune(configs=[{configs}], key={key})"
    return (f"{head}\n@triton.jit\ndef k(out_ptr, M, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):\n"
            "    pass\n")


def test_an_autotune_config_list_is_read_from_its_literals():
    kernel = SPEC.kernel("matmul_fp16")
    tree = ast.parse(kernel_from_cell(kernel.reference.read_text(), kernel.function).source)
    autotune, problems = read_autotune(next(n for n in tree.body if isinstance(n, ast.FunctionDef)))
    assert problems == [] and autotune.key == ("M", "N", "K") and len(autotune.configs) == 8
    assert autotune.configs[0] == AutotuneConfig((("BLOCK_SIZE_M", 128), ("BLOCK_SIZE_N", 256), ("BLOCK_SIZE_K", 64),
                                                  ("GROUP_SIZE_M", 8)), num_warps=8, num_stages=3)
    cell = _autotuned('triton.Config({"BLOCK_SIZE_M": 16}), triton.Config({"BLOCK_SIZE_N": 32}, num_stages=2)')
    tree = ast.parse(cell)
    assert read_autotune(tree.body[0]) == (Autotune((AutotuneConfig((("BLOCK_SIZE_M", 16),)),
                                                     AutotuneConfig((("BLOCK_SIZE_N", 32),), num_stages=2)),
                                                    ("M",)), [])


CONFIG = 'triton.Config({"BLOCK_SIZE_M": 16})'


@pytest.mark.parametrize("cell, words", [
    (_autotuned(", ".join([CONFIG] * (MAX_AUTOTUNE_CONFIGS + 1))),
     f"configs must be a list of 1 to {MAX_AUTOTUNE_CONFIGS} triton.Config(...) (the cap on autotune configs, each "
     f"compiled and timed by the grader), got {MAX_AUTOTUNE_CONFIGS + 1} configs"),
    (_autotuned("", decorator="@triton.autotune(configs=CONFIGS, key=['M'])"), "got no list"),
    (_autotuned('triton.Config({"BLOCK_SIZE_M": 2 * 8})'), "config 1: its dict must map names (strings) to integers"),
    (_autotuned('triton.Config({"M": 16})'), "config 1 sets M, which is not a tl.constexpr parameter"),
    (_autotuned('triton.Config({"BLOCK_SIZE_M": 1 << 20})'), "its dict must map names (strings) to integers"),
    (_autotuned('triton.Config({"BLOCK_SIZE_M": 131072})'), "sets BLOCK_SIZE_M to 131072; a config's values are "
                                                            "from 0 to 65536"),
    (_autotuned('triton.Config({"BLOCK_SIZE_M": 16}, pre_hook=print)'), "its only keywords are num_warps and num_stages"),
    (_autotuned('triton.Config({"BLOCK_SIZE_M": 16}, num_warps=3)'), "config 1: num_warps must be one of"),
    (_autotuned('triton.Config({"BLOCK_SIZE_M": 16}, num_stages=9)'), "num_stages must be from 1 to 8"),
    (_autotuned("__import__('os').system('true')"), "config 1 must be triton.Config("),
    (_autotuned(CONFIG, key='["Q"]'), "key must be a list of the kernel's parameter names"),
    (_autotuned("", decorator=f"@triton.autotune(configs=[{CONFIG}], key=['M'], prune_configs_by={{}})"),
     "takes exactly configs=[triton.Config(...), ...] and key=[...], nothing else"),
], ids=["too-many", "not-a-list", "computed", "not-constexpr", "shifted", "too-large", "pre-hook", "warps", "stages", "call", "key", "prune"])
def test_an_autotune_decorator_not_written_as_literals_is_refused_when_read(cell, words):
    with pytest.raises(TritonSourceError, match="not Triton kernel code: line 1: .*" + re.escape(words)):
        kernel_from_cell(cell, "k")
    heuristics = _autotuned("", decorator="@triton.heuristics({'BLOCK_SIZE_M': lambda args: 16})")
    with pytest.raises(TritonSourceError, match="not a function decorated with @triton.jit"):
        kernel_from_cell(heuristics, "k")


def test_the_release_stub_is_not_written_yet():
    stub = "@triton.jit\ndef k(x_ptr):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    assert kernel_from_cell(stub, "k").is_stub
    assert not _kernel(REFERENCES["add"]).is_stub


def test_in_a_notebook_the_kernel_is_read_from_its_cells_text():
    """IPython keeps a cell's text where linecache finds it by the code's file name: the same reading as the
    trusted grader's, whatever the function object holds."""
    name = "<ipython-input-cell>"
    linecache.cache[name] = (len(CELL), None, CELL.splitlines(True), name)
    jit = SimpleNamespace(jit=lambda fn: SimpleNamespace(fn=fn))   # a @triton.jit object: the function as .fn
    namespace: dict = {"triton": jit, "tl": None}
    try:
        exec(compile(CELL, name, "exec"), namespace)
        assert kernel_from_function(namespace["twice_kernel"]) == kernel_from_cell(CELL, "twice_kernel")
    finally:
        del linecache.cache[name]
    with pytest.raises(TritonSourceError, match="expected a kernel decorated with @triton.jit"):
        kernel_from_function("add_kernel")


def test_in_a_notebook_an_autotuned_kernel_is_read_from_its_cells_text_too(interpreter):
    """``@triton.autotune`` makes an autotuner object holding the ``@triton.jit`` one: the cell is read as well
    (in interpreter mode: a compiled kernel defined in this process would break the interpreted ones)."""
    import triton
    import triton.language as tl
    name, cell = "<ipython-input-autotuned>", _autotuned('triton.Config({"BLOCK_SIZE_M": 16})')
    linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
    namespace: dict = {"triton": triton, "tl": tl}
    try:
        exec(compile(cell, name, "exec"), namespace)
        assert kernel_from_function(namespace["k"]) == kernel_from_cell(cell, "k")
    finally:
        del linecache.cache[name]


def test_a_submission_resolves_a_triton_kernel_and_its_launch_literal():
    nb = new_notebook()
    cell = new_code_cell(CELL)
    cell.metadata["nbgrader"] = {"grade_id": "twice", "solution": True, "grade": False, "locked": False,
                                 "schema_version": 3}
    nb.cells.append(cell)
    submission = Submission(nb)
    assert submission.value("twice_kernel") == kernel_from_cell(CELL, "twice_kernel")
    assert submission.value("twice_launch") == {"BLOCK_SIZE": 64}
    with pytest.raises(SubmissionError, match="host is not a numba kernel|outside|cuda"):
        submission.value("host")


def test_a_triton_kernels_source_over_the_cap_is_refused_saying_which_cap():
    cell = f"@triton.jit\ndef big_kernel(x_ptr):\n    # {'x' * 25_000}\n    pass\n"
    nb = new_notebook()
    nb.cells.append(new_code_cell(cell, metadata={"nbgrader": {"grade_id": "big", "solution": True, "grade": False,
                                                               "locked": False, "schema_version": 3}}))
    with pytest.raises(SubmissionError, match=r"@triton.jit functions.*holds 250\d\d characters; the grader reads "
                                              r"at most 20000"):
        Submission(nb).value("big_kernel")


def test_the_specs_launches_and_what_a_student_may_choose():
    assert SPEC.launches == {"add": Launch(1024, 4), "softmax": Launch(ROW, 8), "layernorm": Launch(ROW, 8),
                             "matmul_fp16": Launch(AUTOTUNE, 4, TILE), "matmul_bf16": Launch(AUTOTUNE, 4, TILE)}
    assert resolve_launch(SPEC.launches["matmul_fp16"], {}) == SPEC.launches["matmul_fp16"]
    assert SPEC.launches["softmax"].block((7, 1025)) == 2048 and SPEC.launches["softmax"].block((1, 1)) == 1
    assert resolve_launch(SPEC.launches["add"], {"BLOCK_SIZE": 256, "num_warps": 2}) == Launch(256, 2)
    assert resolve_launch(SPEC.launches["softmax"], {"num_warps": 16}) == Launch(ROW, 16)
    for launch, chosen, words in [("softmax", {"BLOCK_SIZE": 1024}, "BLOCK_SIZE is the grader's"),
                                  ("add", {"BLOCK_SIZE": 1000}, "power of two"),
                                  ("add", {"num_warps": 3}, "num_warps must be one of"),
                                  ("add", {"grid": 3}, "may set only"), ("add", [1024], "must be a dict"),
                                  ("matmul_fp16", {"num_warps": 8}, "its @triton.autotune configs: no launch dict")]:
        with pytest.raises(SpecError, match=words):
            resolve_launch(SPEC.launches[launch], chosen)


class StandInTimer(graders.cuda_engine.timing.Timer):
    """The grader's `Timer` (prepare, launch, verify per sample) with a stand-in clock: SAMPLES samples each."""

    def timed(self, name: str, run) -> float:
        run()
        return {"baseline": 2e-3, "kernel": 1e-3}[name]

    def measure(self, budget_s: float):
        return super().measure(budget_s, min_samples=SAMPLES, max_samples=SAMPLES)


class Interpreted(child.InterpretedBench):
    def timer(self, subjects: dict) -> StandInTimer:
        return StandInTimer(subjects)


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")   # read when @triton.jit decorates: at `load`


def _graded(path, most: int = grade.PREVIEW_ELEMENTS, **launch) -> dict:
    """`check_and_time` on the interpreter, at the kernel's check shapes of at most ``most`` elements, timed at
    the largest of them."""
    kernel = SPEC.kernel(_kid(path))
    shapes = sorted((s for s in kernel.check_shapes if math.prod(s) <= most), key=math.prod)
    small = dataclasses.replace(kernel, check_shapes=tuple(shapes), perf_shape=shapes[-1])
    launched = resolve_launch(SPEC.launches[kernel.id], launch or None)
    bench = Interpreted(problem(kernel.kind, "triton"), launched, seed=7)
    return cuda_child.check_and_time(bench, small, _kernel(path).source, 60.0)


@pytest.mark.parametrize("kid", sorted(filter(_interpretable, REFERENCES)))
def test_each_reference_is_right_and_timed_in_the_interpreter(interpreter, kid):
    found = _graded(REFERENCES[kid])
    assert found["status"] == Status.OK, found["message"]
    assert found["compile"]["interpreted"] and found["timing"]["verified_launches"] == SAMPLES
    assert all(c["ok"] for c in found["checks"]) and any(c.get("after_timing") for c in found["checks"])


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("path", [p for p in TRACK.wrong_solutions() if _interpretable(tracks.graded_kernel(p))],
                         ids=lambda p: p.stem)
def test_each_known_wrong_solution_is_caught_in_the_interpreter(interpreter, path):
    found = _graded(path)
    assert found["status"] in tracks.expected_statuses(path) and found["status"] != Status.OK, found
    assert found["message"].startswith("at shape ")


def test_a_smaller_block_of_the_students_is_launched_with_more_programs(interpreter):
    found = _graded(REFERENCES["add"], most=1000, BLOCK_SIZE=16, num_warps=1)
    assert found["status"] == Status.OK and found["compile"]["launch"] == {"BLOCK_SIZE": 16, "num_warps": 1}


@pytest.mark.parametrize("body, status, words", [
    ("    tl.store(out_ptr + tl.arange(0, BLOCK_SIZE), tl.arange(0, 3))", Status.KERNEL_ERROR, "your kernel raised"),
    ("    tl.no_such_function(n)", Status.KERNEL_ERROR, "no_such_function"),
], ids=["not-a-power-of-two", "no-such-function"])
def test_a_kernel_that_raises_as_it_runs_is_a_kernel_error(interpreter, tmp_path, body, status, words):
    path = tmp_path / "add.py"
    path.write_text(f"@triton.jit\ndef add_kernel(out_ptr, a_ptr, b_ptr, n, BLOCK_SIZE: tl.constexpr):\n{body}\n")
    kernel = SPEC.kernel("add")
    bench = Interpreted(problem("vecadd"), SPEC.launches["add"], seed=7)
    found = cuda_child.check_and_time(bench, dataclasses.replace(kernel, check_shapes=((5,),), perf_shape=(5,)),
                                      kernel_from_cell(path.read_text(), "add_kernel").source, 60.0)
    assert found["status"] == status and words in found["message"], found


def test_a_cell_that_defines_no_such_kernel_raises_or_leaves_triton_is_a_compile_error(interpreter):
    bench = Interpreted(problem("vecadd"), SPEC.launches["add"], seed=7)
    kernel = SPEC.kernel("add")
    raising = "@triton.jit\ndef add_kernel(x, x):\n    pass\n"
    escaping = "@triton.jit\ndef add_kernel(x):\n    tl.core.builtins.exec('1')\n"
    for source, words in [(raising, "defining your kernel raised SyntaxError: duplicate argument"),
                          ("@triton.jit\ndef other(x):\n    pass\n", "defines no @triton.jit function add_kernel"),
                          (escaping, "not Triton kernel code: line 3: tl.core.builtins is not Triton"),
                          ("import os\n" + CELL, "not Triton kernel code: line 1: only @triton.jit functions are run")]:
        found = cuda_child.check_and_time(bench, kernel, source, 60.0)
        assert found["status"] == Status.COMPILE_ERROR and words in found["message"]


def test_an_autotuned_kernels_configs_are_applied_by_the_child_and_must_match_its_step(interpreter):
    """The decorator is read, not run: its lines are blanked in what the child runs; the interpreter runs the first
    config. A step launched by its configs needs them, each setting the tile; no other step takes them."""
    kernel = SPEC.kernel("matmul_fp16")
    small = dataclasses.replace(kernel, check_shapes=((3, 5, 7),), perf_shape=(3, 5, 7))
    source = _kernel(kernel.reference).source
    bench = Interpreted(problem("matmul_fp16", "triton"), SPEC.launches["matmul_fp16"], seed=7)
    found = cuda_child.check_and_time(bench, small, source, 60.0)
    assert found["status"] == Status.OK, found["message"]
    assert found["compile"]["autotune"]["key"] == ["M", "N", "K"] and len(found["compile"]["autotune"]["configs"]) == 8
    assert found["compile"]["launch"] == {"BLOCK_SIZE": AUTOTUNE, "tile": list(TILE)}
    plain = re.sub(r"@triton.autotune\(.*?\n\)\n", "", source, flags=re.DOTALL)
    untiled = source.replace('"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64', '"BLOCK_SIZE_N": 64')
    add = _kernel(REFERENCES["add"]).source
    for bench, source, words in [
            (bench, plain, "decorate matmul_fp16_kernel with @triton.autotune(configs=["),
            (bench, untiled, "every autotune config sets the tile, BLOCK_SIZE_N and BLOCK_SIZE_M: config 8 sets no "
                             "BLOCK_SIZE_M"),
            (Interpreted(problem("vecadd"), SPEC.launches["add"], seed=7),
             f"@triton.autotune(configs=[{CONFIG.replace('_M', '')}], key=['n'])\n" + add,
             "add_kernel takes no @triton.autotune")]:
        found = cuda_child.check_and_time(bench, small if bench.problem.kind != "vecadd" else SPEC.kernel("add"),
                                          source, 60.0)
        assert found["status"] == Status.COMPILE_ERROR and words in found["message"], found["message"]


def test_a_16_bit_output_ends_where_its_guard_begins():
    bench = Interpreted(problem("matmul_fp16", "triton"), SPEC.launches["matmul_fp16"], seed=7)
    buffer, out = bench.output((3, 5, 7))
    assert out.dtype == torch.float16 and out.shape == (3, 5) and bool(out.isnan().all())
    words = buffer.view(torch.int32)
    assert words.numel() == 8 + 2 * cuda_child.GUARD_ELEMENTS and cuda_child.guard_damage(buffer) == ""
    assert out.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
    assert (out.storage_offset() + 15) * 2 == (cuda_child.GUARD_ELEMENTS + 8) * 4   # its last element, then the guard
    buffer.view(torch.float16)[out.storage_offset() + 15] = 0.0                    # one past its end
    assert "after the end of the output" in cuda_child.guard_damage(buffer)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    monkeypatch.setattr(grade, "_checked", {})
    gpu.detect_gpu.cache_clear()
    yield
    gpu.detect_gpu.cache_clear()


def test_the_check_cell_says_one_line_from_the_interpreter_in_a_sandboxed_child(no_gpu, capsys):
    grade.check("triton", "add", _kernel(REFERENCES["add"]), {"BLOCK_SIZE": 256, "num_warps": 4})
    wrong = _kernel(TRACK.solutions / "wrong" / "softmax_no_max.py")
    grade.check("triton", "softmax", wrong, {"num_warps": 8})
    right, caught = capsys.readouterr().out.splitlines()
    assert right.startswith("✓ add: right at 1; 255; 256; 257; 1000; 4099 on public inputs, in Triton's interpreter")
    assert caught.startswith("✗ softmax: at shape ") and "was the row's max subtracted?" in caught
    with pytest.raises(KernelFailed, match="softmax: at shape "):   # the graded cell's public part, from the cache
        grade.assert_runs("triton", "softmax", wrong, {"num_warps": 8})


def test_the_check_cell_says_what_is_not_written_or_not_allowed_without_running_it(no_gpu, capsys, monkeypatch):
    monkeypatch.setattr(grade, "run_child", lambda *a, **k: pytest.fail("ran a child"))
    stub = TritonKernel("@triton.jit\ndef add_kernel(out_ptr):\n    raise NotImplementedError()\n", "add_kernel")
    grade.check("triton", "add", stub, {"BLOCK_SIZE": 1024})
    grade.check("triton", "add", _kernel(REFERENCES["add"]), {"BLOCK_SIZE": 1000})
    assert capsys.readouterr().out.splitlines() == [
        "✗ add: not written yet (its body is still the stub)",
        "✗ add: the launch: BLOCK_SIZE must be a power of two from 1 to 65536, got 1000"]
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    grade.check("triton", "add", stub)
    assert grade.score_triton("triton", "add", stub) is None
    assert capsys.readouterr().out.splitlines() == [
        "add: not run here while autograding; the hidden tests grade it.", GRADED_OUTSIDE]


def test_without_a_gpu_the_check_cell_says_why_a_bf16_matmul_is_not_run(no_gpu, capsys, monkeypatch):
    monkeypatch.setattr(grade, "run_child", lambda *a, **k: pytest.fail("ran a child"))
    grade.check("triton", "matmul_bf16", _kernel(REFERENCES["matmul_bf16"]))
    assert capsys.readouterr().out == ("? matmul_bf16: not run on this machine's CPU: Triton's interpreter "
                                       "computes tl.dot of bf16 tiles wrongly. The GPU worker checks it.\n")
    grade.assert_runs("triton", "matmul_bf16", _kernel(REFERENCES["matmul_bf16"]))   # ? is not ✗


def test_grading_refuses_a_launch_the_spec_does_not_allow_before_any_child(no_gpu, monkeypatch):
    monkeypatch.setattr(grade, "run_child", lambda *a, **k: pytest.fail("ran a child"))
    result = grade.grade_triton("triton", "softmax", _kernel(REFERENCES["softmax"]), {"BLOCK_SIZE": 4096})
    assert result.status == Status.REFUSED and "BLOCK_SIZE is the grader's" in result.message and result.points == 0


def test_the_trusted_grader_reads_each_graded_cells_call_from_the_submitted_notebook(no_gpu, monkeypatch):
    """What autograde resolves from the notebook's text: ``score_triton('triton', KERNEL_ID, the kernel read from
    its solution cell, its launch literal)``; without a GPU grading stops, and the stub fails before any child."""
    monkeypatch.setattr(grade, "run_child", lambda *a, **k: pytest.fail("ran a child"))
    source = nbformat.read(str(TRACK.notebook_path), as_version=4)
    answers = cuda_answers("triton")
    stubbed = {kid: re.sub(r"### BEGIN SOLUTION.*### END SOLUTION", "# YOUR CODE HERE\n    raise NotImplementedError()",
                           cell.source, flags=re.DOTALL)
               for cell in source.cells if is_solution(cell) for kid in [cell.metadata.nbgrader.grade_id]}
    for filled, stub in [(fill(source, answers), False), (fill(source, stubbed), True)]:
        submission = Submission(filled)
        for cell in filter(is_grade, filled.cells):
            call = hidden_call(cell.source, set(HIDDEN_TESTS))
            args = [submission.resolve(a) for a in call.args]
            kid = args[1]
            kernel = SPEC.kernel(kid)
            assert call.function == "score_triton" and args[0] == "triton"
            launches = {"add": [{"BLOCK_SIZE": 1024, "num_warps": 4}], "softmax": [{"num_warps": 8}],
                        "layernorm": [{"num_warps": 8}], "matmul_fp16": [], "matmul_bf16": []}
            assert args[3:] == launches[kid]
            if stub:
                assert args[2].is_stub
                with pytest.raises(KernelFailed, match="not written yet"):
                    HIDDEN_TESTS[call.function](*args)
            else:
                reference = kernel_from_cell(kernel.reference.read_text(), kernel.function)
                assert args[2].name == kernel.function and args[2].source.strip() == reference.source.strip()
                with pytest.raises(NeedsGPUWorker, match="needs a GPU worker"):
                    HIDDEN_TESTS[call.function](*args)


def test_the_grading_child_serves_one_kernel():
    """The student's Python runs in the child (its source, and Triton's compile): no session reuses it."""
    assert not hasattr(child, "reusable")


def test_a_check_cells_launch_that_never_ends_is_a_timeout_and_its_child_leaves(interpreter):
    """`child.checked` (a check cell on the GPU) answers a hung launch as grading does: ``timeout``, and the
    child exits with its answer."""
    class Hung(Interpreted):
        def finish_launch(self, shape: str) -> None:
            raise cuda_child.LaunchHung(10, shape)

    kernel = SPEC.kernel("add")
    found = child.checked(Hung(problem("vecadd"), SPEC.launches["add"], seed=7), _kernel(REFERENCES["add"]).source,
                          kernel.function, [(5,)])
    assert found["status"] == Status.TIMEOUT and found["exit_at_once"] is True
    assert found["message"].startswith("your kernel did not finish within 10 s of its launch at shape 5 ")
