"""The TileLang engine without a GPU: a kernel read from its cell by parsing and held to the DSL's allowlist
(graders/tilelang_engine/kernel_source.py, and through graders/submission.py), the child's own refusals and
errors, its bench on CPU tensors with a stand-in kernel (the Triton engine's fenced inputs and typed outputs,
a launch that raises as a kernel error), and the parent's refusals before any child."""
from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from graders.cuda_engine.child import Bench
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.problems import problem
from graders.cuda_engine.spec import Geometry
from graders.hidden_tests import HIDDEN_TESTS
from graders.result import Status
from graders.submission import Submission, SubmissionError
from graders.tilelang_engine import child, grade
from graders.tilelang_engine.kernel_source import (DSL, TileLangKernel, TileLangSourceError, kernel_from_cell,
                                                   kernel_from_function, tilelang_kernel_in_cell)
from graders.triton_engine.child import FENCE_ELEMENTS

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
    later tests' children would inherit)."""
    saved = dict(os.environ)
    import tilelang
    os.environ.clear()
    os.environ.update(saved)
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
    (_builder(BODY + "            open('/etc/passwd')"), "line 8: k uses open; a kernel may use its parameters"),
    (_builder(BODY + "            getattr(out, 'data')"), "line 8: k uses getattr"),
    (_builder(BODY + "            out.data"), "line 8: k uses out.data; the attributes a kernel uses are T.<name>"),
    (_builder(BODY + "            T.call_extern('int32', 'system')"), "line 8: k uses T.call_extern"),
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
], ids=["default", "no-default", "builtin", "getattr", "attribute", "call-extern", "import-source", "T-alias",
        "T-store", "underscore", "lambda", "import", "while", "double-star", "comprehension", "return", "for", "decorator"])
def test_a_kernel_that_would_run_host_python_is_refused_when_read(cell, words):
    """TileLang runs the builder and its parse of the prim_func as Python: only the DSL is read."""
    with pytest.raises(TileLangSourceError, match="not TileLang kernel code: .*" + re.escape(words)):
        kernel_from_cell(cell, "k")


def test_the_dsl_names_are_tilelangs(tilelang):
    assert all(hasattr(tilelang.language, name) for name in DSL)


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
