"""The TileLang engine without a GPU: a kernel read from its cell by parsing and held to the DSL's allowlist
(graders/tilelang_engine/kernel_source.py, and through graders/submission.py), the child's own refusals and
errors, its bench on CPU tensors with a stand-in kernel (the Triton engine's fenced inputs and typed outputs,
a launch that raises as a kernel error), the parent's refusals before any child; the track's references and
known-wrong solutions compiled by TileLang for sm_90a (lowered to CUDA C++: no GPU or nvcc needed), the check
cell's line from a sandboxed child, and the trusted grader's reading of the track's graded cells."""
from __future__ import annotations

import os
import re
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.utils import is_grade, is_solution

from graders import gpu, tracks
from graders.cuda_engine.child import Bench
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import Geometry
from graders.gpu import NeedsGPUWorker
from graders.hidden_tests import HIDDEN_TESTS
from graders.result import Status
from graders.submission import Submission, SubmissionError, hidden_call
from graders.tilelang_engine import child, grade
from graders.tilelang_engine.kernel_source import (DSL, ENUMS, TileLangKernel, TileLangSourceError, kernel_from_cell,
                                                   kernel_from_function, tilelang_kernel_in_cell)
from graders.tilelang_engine.spec import load_tilelang_spec
from graders.triton_engine.child import FENCE_ELEMENTS
from workshop.submissions import cuda_answers, fill

TRACK = tracks.get("tilelang")
SPEC = load_tilelang_spec("tilelang")
SOLUTIONS = [k.reference for k in SPEC.kernels.values()] + TRACK.wrong_solutions()

CELL = '''import math

@tilelang.jit
def double(block=256, threads=128, dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def kernel(out: T.Tensor((n,), dtype), x: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    out[bx * block + i] = x[bx * block + i] * 2

    return kernel


def host():
    print(math.pi)
'''


@pytest.fixture(scope="module")
def tilelang():
    """tilelang imported, os.environ as it was before (its import sets PYTHONPATH and TVM's paths there, which
    later tests' children would inherit), its kernel cache off (each compile here is a real one)."""
    saved = dict(os.environ)
    import tilelang
    os.environ.clear()
    os.environ.update(saved)
    tilelang.disable_cache()
    return tilelang


def _builder(body: str, params: str = "block=256") -> str:
    """A ``@tilelang.jit`` builder ``k`` whose prim_func's body is ``body`` (lines indented by 8)."""
    return (f"@tilelang.jit\ndef k({params}):\n    n = T.dynamic(\"n\")\n\n    @T.prim_func\n"
            f"    def kernel(out: T.Tensor((n,), \"float32\")):\n{body}\n\n    return kernel\n")


def test_a_kernel_is_its_builder_at_its_own_lines():
    kernel = kernel_from_cell(CELL, "double")
    lines, cell = kernel.source.split("\n"), CELL.split("\n")
    assert all(lines[i] == cell[i] for i, line in enumerate(lines) if line)   # each kept line where the cell has it
    assert kernel.source.startswith("\n\n@tilelang.jit\ndef double(")
    assert "import math" not in kernel.source and "def host" not in kernel.source
    assert not kernel.is_stub and kernel.knobs() == {"block": 256, "threads": 128, "dtype": "float32"}
    assert tilelang_kernel_in_cell(CELL, "host") is None and tilelang_kernel_in_cell(CELL, "nothing") is None
    with pytest.raises(TileLangSourceError, match="not a function decorated with @tilelang.jit"):
        kernel_from_cell(CELL.replace("@tilelang.jit", "@tilelang.jit(out_idx=[0])"), "double")
    with pytest.raises(TileLangSourceError, match="does not parse"):
        kernel_from_cell("@tilelang.jit\ndef k(:\n", "k")


BODY = "        with T.Kernel(n, threads=128) as bx:\n"


@pytest.mark.parametrize("cell, words", [
    (_builder(BODY + "            out[bx] = 1.0", "block=__import__('os')"),
     "line 2: a default value of k must be a literal"),
    (_builder(BODY + "            out[bx] = 1.0", "block"), "line 2: every parameter of k is a plain one with a default"),
    (_builder(BODY + "            out[bx] = 1.0", "block: open('x') = 1"), "line 2: k uses open"),
    (_builder(BODY + "            out[bx] = 1.0").replace('"float32")):', '"float32")) -> print(1):'),
     "line 6: k uses print"),
    (_builder(BODY + "            open('/etc/passwd')"), "line 8: k uses open; a kernel may use its parameters"),
    (_builder(BODY + "            getattr(out, 'data')"), "line 8: k uses getattr"),
    (_builder(BODY + "            out.data"), "line 8: k uses out.data; the attributes a kernel uses are T.<name>"),
    (_builder(BODY + "            T.call_extern('int32', 'system')"), "line 8: k uses T.call_extern"),
    (_builder(BODY + "            T.GemmWarpPolicy.__class__"), "line 8: k uses T.GemmWarpPolicy.__class__"),
    (_builder(BODY + "            T.GemmWarpPolicy.FullRow.name"), "line 8: k uses T.GemmWarpPolicy.FullRow.name"),
    (_builder(BODY + "            T.import_source('#include <cstdlib>')"), "line 8: k uses T.import_source"),
    (_builder(BODY + "            L = T\n            L.copy(out, out)"), "line 8: k uses T itself"),
    (_builder(BODY + "            T.copy = T.gemm"), "line 8: k uses T.copy; the attributes"),
    (_builder(BODY + "            __tb = 1"), "line 8: k uses __tb; a kernel's names do not begin with _"),
    (_builder(BODY + "            out[bx] = (lambda: 1)()"), "line 8: Lambda is not TileLang kernel code"),
    (_builder(BODY + "            import os"), "line 8: Import is not TileLang kernel code"),
    (_builder(BODY + "            while True:\n                pass"), "line 8: While is not TileLang kernel code"),
    (_builder(BODY + "            T.fill(out, **{'value': 1.0})"), "line 8: a call in k passes **"),
    (_builder(BODY + "            out[bx] = [i for i in range(3)][0]"), "line 8: ListComp is not TileLang kernel code"),
    (_builder(BODY + "            out[bx] = 1.0").replace("    return kernel\n", "    return T\n"),
     "k ends with return kernel"),
    (_builder(BODY + "            out[bx] = 1.0").replace("    n = T.dynamic", "    for i in range(2):\n        pass\n"
                                                          "    n = T.dynamic"),
     "line 3: k's body holds assignments, its @T.prim_func and its return, not For"),
    (_builder(BODY + "            out[bx] = 1.0").replace("    @T.prim_func\n", "    @T.prim_func\n    @print\n"),
     "k defines exactly one @T.prim_func, not 0"),
], ids=["default", "no-default", "annotation", "return-annotation", "builtin", "getattr", "attribute", "call-extern", "import-source", "T-alias", "enum-dunder", "enum-member-attribute",
        "T-store", "underscore", "lambda", "import", "while", "double-star", "comprehension", "return", "for", "decorator"])
def test_a_kernel_that_would_run_host_python_is_refused_when_read(cell, words):
    """TileLang runs the builder and its parse of the prim_func as Python: only the DSL is read."""
    with pytest.raises(TileLangSourceError, match="not TileLang kernel code: .*" + re.escape(words)):
        kernel_from_cell(cell, "k")


def test_the_dsl_names_are_tilelangs(tilelang):
    assert all(hasattr(tilelang.language, name) for name in DSL)
    assert all(hasattr(getattr(tilelang.language, enum), member) for enum, members in ENUMS.items() for member in members)


def test_a_kernel_may_name_a_member_of_the_dsls_enumerations():
    cell = _builder(BODY + "            T.gemm(out, out, out, policy=T.GemmWarpPolicy.FullRow)")
    assert not kernel_from_cell(cell, "k").is_stub


def test_the_release_stub_is_not_written_yet_and_is_not_held_to_the_dsl():
    stub = "@tilelang.jit\ndef k(block=256):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    assert kernel_from_cell(stub, "k").is_stub and not kernel_from_cell(CELL, "double").is_stub


def test_in_a_notebook_the_kernel_is_read_from_its_cells_text(monkeypatch):
    """tilelang.jit's object holds the builder as ``.func.orig_func``; IPython keeps the cell's text where
    linecache finds it by the code's file name."""
    import linecache
    name = "<ipython-input-tilelang>"
    monkeypatch.setitem(linecache.cache, name, (len(CELL), None, CELL.splitlines(True), name))
    namespace: dict = {"tilelang": SimpleNamespace(jit=lambda fn: SimpleNamespace(func=SimpleNamespace(orig_func=fn))),
                       "T": None}
    exec(compile(CELL, name, "exec"), namespace)
    assert kernel_from_function(namespace["double"]) == kernel_from_cell(CELL, "double")
    with pytest.raises(TileLangSourceError, match="expected a kernel decorated with @tilelang.jit"):
        kernel_from_function("double")


def _notebook(*sources: str) -> Submission:
    nb = new_notebook()
    for i, source in enumerate(sources):
        nb.cells.append(new_code_cell(source, metadata={"nbgrader": {"grade_id": f"cell{i}", "solution": True,
                                                                     "grade": False, "locked": False,
                                                                     "schema_version": 3}}))
    return Submission(nb)


def test_a_submission_resolves_a_tilelang_builder_and_refuses_one_outside_the_dsl():
    submission = _notebook(CELL, _builder(BODY + "            open('x')"))
    assert submission.value("double") == kernel_from_cell(CELL, "double")
    assert isinstance(submission.value("double"), TileLangKernel)
    with pytest.raises(SubmissionError, match="not TileLang kernel code: line 8: k uses open"):
        submission.value("k")
    big = _builder(BODY + f"            # {'x' * 25_000}\n            out[bx] = 1.0")
    with pytest.raises(SubmissionError, match=r"@tilelang.jit builder\) holds 25\d\d\d characters; the grader reads "
                                              r"at most 20000"):
        _notebook(big).value("k")


def test_the_child_holds_what_it_is_sent_to_the_dsl_again_and_names_the_cells_line(tilelang):
    source = kernel_from_cell(CELL, "double").source
    with pytest.raises(CompileError, match="line 1: only the @tilelang.jit builder is run"):
        child.build("import os\n" + source, "double")
    with pytest.raises(CompileError, match="line 8: k uses open"):
        child.build(_builder(BODY + "            open('x')"), "k")
    with pytest.raises(CompileError, match="defines no @tilelang.jit function other"):
        child.build(source, "other")
    raising = _builder(BODY + "            T.copy(out, 1)")
    with pytest.raises(CompileError, match=r"building your kernel \(k\(\) with its defaults\) raised at line 8 of "
                                           r"your cell: "):
        child.build(raising, "k")


class StandIn(child.TileLangLaunch, Bench):
    """The child's bench on CPU tensors, its kernel a Python stand-in for a compiled TileLang one."""

    def __init__(self, kind: str, kernel):
        super().__init__(problem(kind, "tilelang"), Geometry((1, 1), (1, 1)), seed=7)
        self.kernel = kernel


def test_the_bench_launches_kernel_out_inputs_on_fenced_inputs_into_a_typed_output():
    import torch
    seen = {}

    def matmul(out, a, b):
        seen["fenced"] = [torch.isnan(t.view(-1).as_strided((FENCE_ELEMENTS,), (1,), t.storage_offset()
                                                             - FENCE_ELEMENTS)).all() for t in (a, b)]
        out.copy_((a.float() @ b.float()).half())

    found = StandIn("matmul_fp16", matmul).check((17, 40, 72))
    assert found["ok"], found["message"]
    assert all(seen["fenced"])
    assert StandIn("matmul_fp16", matmul).output((17, 40))[1].dtype == torch.float16


def test_a_launch_that_raises_is_a_kernel_error():
    def refuses(out, x):
        raise ValueError("Argument out.shape[1] has an unsatisfied constraint")

    found = StandIn("row_softmax", refuses).check((3, 1000))
    assert not found["ok"] and found["status"] == Status.KERNEL_ERROR
    assert "your kernel raised ValueError: Argument out.shape[1]" in found["message"]


def test_the_parent_refuses_what_is_not_a_kernel_and_a_stub_without_a_child(tmp_path, monkeypatch):
    monkeypatch.setattr(grade, "run_child", lambda *a, **k: pytest.fail("ran a child"))
    spec = tmp_path / "spec.toml"
    spec.write_text('[assignment]\nname = "t"\nengine = "tilelang"\ntargets = "provisional"\n\n[[kernel]]\n'
                    'id = "softmax"\nfunction = "softmax"\nkind = "row_softmax"\ncheck_shapes = [[3, 5]]\n'
                    'perf_shape = [3, 5]\nfloor = 0.3\ntarget = 0.8\npoints_correct = 1\npoints_perf = 2\n')
    result = grade.grade_tilelang(spec, "softmax", "def softmax(): pass")
    assert result.status == Status.REFUSED and result.points == 0.0
    assert "expected a kernel decorated with @tilelang.jit" in result.message
    stub = kernel_from_cell("@tilelang.jit\ndef softmax(block=1):\n    raise NotImplementedError()\n", "softmax")
    with pytest.raises(KernelFailed, match="softmax: the kernel is not written yet"):
        HIDDEN_TESTS["score_tilelang"](spec, "softmax", stub)   # as the trusted grader calls it
    assert grade.checked(spec, "softmax", stub) == ("✗", "softmax: not written yet (its body is still the stub)")


def test_the_grading_child_serves_one_kernel():
    """The student's Python runs in the child (the builder, and TileLang's parse): no session reuses it."""
    assert not hasattr(child, "reusable")


def _kid(path) -> str:
    return tracks.graded_kernel(path) if "wrong" in path.parts else next(
        kid for kid, k in SPEC.kernels.items() if k.reference == path)


def _kernel(path) -> TileLangKernel:
    return kernel_from_cell(path.read_text(), SPEC.kernel(_kid(path)).function)


@pytest.fixture(scope="module")
def compiled(tilelang) -> dict[str, dict]:
    """The child's answer to a check without a GPU (`child.handle`, in this process) for each reference and
    known-wrong solution, by file name: compiled once each."""
    return {path.name: child.handle({"spec_path": str(SPEC.path), "kernel_id": _kid(path), "seed": 0,
                                     "source": _kernel(path).source, "mode": "check", "device": "cpu"})
            for path in SOLUTIONS}


@pytest.mark.parametrize("kid", list(SPEC.kernels))
def test_each_reference_compiles_for_hopper(compiled, kid):
    found = compiled[SPEC.kernel(kid).reference.name]
    assert found["status"] == Status.OK, found["message"]
    assert found["compile"]["arch"] == "sm_90a" and found["compile"]["cuda_lines"] > 50
    hopper = kid == "matmul_fp16"   # T.copy into shared memory through TMA, T.gemm on wgmma; the softmax neither
    assert found["compile"]["tma"] == found["compile"]["wgmma"] == hopper


@pytest.mark.parametrize("path", TRACK.wrong_solutions(), ids=lambda p: p.stem)
def test_each_known_wrong_solution_compiles_unless_its_status_says_it_does_not(compiled, path):
    found = compiled[path.name]
    if tracks.expected_statuses(path) == (Status.COMPILE_ERROR,):
        assert found["status"] == Status.COMPILE_ERROR and "T.gemm K shape check failed" in found["message"]
    else:
        assert found["status"] == Status.OK, found["message"]


def test_the_bench_loads_a_kernel_compiled_by_tilelang_and_nvcc(tilelang):
    """What the GPU child's `load` does, here where a CUDA toolkit is (the cubin needs nvcc, not a GPU); a kernel
    TileLang refuses is a `CompileError` with its reason."""
    if not tilelang.env.CUDA_HOME:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    bench = StandIn("row_softmax", None)
    found = bench.load(_kernel(SPEC.kernel("softmax").reference).source, "softmax")
    assert found["arch"] == child.CPU_ARCH and found["cuda_lines"] > 50 and callable(bench.kernel)
    assert "exp2f(" in bench.kernel.get_kernel_source()
    with pytest.raises(CompileError, match="T.gemm K shape check failed"):
        StandIn("matmul_fp16", None).load(_kernel(TRACK.solutions / "wrong" / "compile_error.py").source,
                                          "matmul_fp16")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    monkeypatch.setattr(grade, "_checked", {})
    gpu.detect_gpu.cache_clear()
    yield
    gpu.detect_gpu.cache_clear()


def test_without_a_gpu_the_check_cell_compiles_in_a_sandboxed_child_and_says_it_did_not_run(no_gpu, capsys):
    grade.check("tilelang", "matmul_fp16", _kernel(SPEC.kernel("matmul_fp16").reference))
    line = capsys.readouterr().out
    assert re.fullmatch(r"\? matmul_fp16: TileLang 0\.1\.15 compiled it to \d+ lines of CUDA C\+\+ for sm_90a \(TMA "
                        r"loads, wgmma\); not run: this machine has no GPU\. The GPU worker checks and times it\.\n",
                        line), line
    grade.assert_runs("tilelang", "matmul_fp16", _kernel(SPEC.kernel("matmul_fp16").reference))   # ? is not ✗


def test_the_trusted_grader_reads_each_graded_cells_call_from_the_submitted_notebook(no_gpu, monkeypatch):
    """What autograde resolves from the notebook's text: ``score_tilelang('tilelang', KERNEL_ID, the builder read
    from its solution cell)``; without a GPU grading stops, and the stub fails before any child."""
    monkeypatch.setattr(grade, "run_child", lambda *a, **k: pytest.fail("ran a child"))
    source = nbformat.read(str(TRACK.notebook_path), as_version=4)
    stubbed = {cell.metadata.nbgrader.grade_id: re.sub(r"### BEGIN SOLUTION.*### END SOLUTION",
                                                       "# YOUR CODE HERE\n    raise NotImplementedError()",
                                                       cell.source, flags=re.DOTALL)
               for cell in source.cells if is_solution(cell)}
    for filled, stub in [(fill(source, cuda_answers("tilelang")), False), (fill(source, stubbed), True)]:
        submission = Submission(filled)
        for cell in filter(is_grade, filled.cells):
            call = hidden_call(cell.source, set(HIDDEN_TESTS))
            args = [submission.resolve(a) for a in call.args]
            assert call.function == "score_tilelang" and args[0] == "tilelang" and len(args) == 3
            kernel = SPEC.kernel(args[1])
            if stub:
                assert args[2].is_stub
                with pytest.raises(KernelFailed, match="not written yet"):
                    HIDDEN_TESTS[call.function](*args)
            else:
                reference = kernel_from_cell(kernel.reference.read_text(), kernel.function)
                assert args[2].name == kernel.function and args[2].source.strip() == reference.source.strip()
                with pytest.raises(NeedsGPUWorker, match="needs a GPU worker"):
                    HIDDEN_TESTS[call.function](*args)
