"""The numba-CUDA kernel subset: honest kernels pass, hostile ones are refused (naming the line) before any
of their code runs, in the parent and again in the grading child."""
import os
import subprocess
import sys

import pytest
from puzzle_cells import REFERENCE, SOLUTIONS, run_cells

from graders.numba_engine import catalogue
from graders.numba_engine.cell_source import kernel_source_from_cell
from graders.numba_engine.grade import run_source
from graders.numba_engine.kernel_source import KernelSourceError, kernel_source
from graders.numba_engine.numba_subset import validate_kernel_source
from graders.settings import ROOT
from workshop.cells import read_cells, strip_solution_markers

WRONG = sorted(SOLUTIONS.glob("wrong/*.py"))
KERNEL = "@cuda.jit\ndef k(out, a, size):\n"        # a payload's body starts on line 3


# --- honest code passes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("puzzle", catalogue.PUZZLES, ids=lambda p: p.id)
def test_reference_kernel_passes_from_the_cell_and_from_the_live_kernel(puzzle):
    cell = strip_solution_markers(REFERENCE[puzzle.id])
    validate_kernel_source(kernel_source_from_cell(cell, puzzle.kernel_name))
    source, _ = kernel_source(run_cells(REFERENCE[puzzle.id])[puzzle.kernel_name])
    validate_kernel_source(source)


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_known_wrong_kernel_passes_validation(path):
    (puzzle_id, cell), = read_cells(path).items()
    name = catalogue.get(puzzle_id).kernel_name
    if "def " not in cell:      # axis_sum_cell_raises: the cell defines no kernel at all
        with pytest.raises(KernelSourceError, match="defines no @cuda.jit function"):
            kernel_source_from_cell(cell, name)
        return
    validate_kernel_source(kernel_source_from_cell(cell, name))
    if "_cell_" not in path.stem:   # the others hang or raise at top level when run
        validate_kernel_source(kernel_source(run_cells(cell)[name])[0])


def test_tampering_cells_kernel_passes_once_its_patching_is_left_out():
    (_, cell), = read_cells(SOLUTIONS / "tampering" / "patch_grader.py").items()
    validate_kernel_source(kernel_source_from_cell(cell, "zip_kernel"))


HONEST = '''
import math
import numpy as np
import numba as nb
from numba import cuda, float32, int32
from math import sqrt, pi
TPB = 8
HALF = TPB // 2
SCALE = -2.5e-3 * math.pi
FLAG = True
"""A docstring."""

@cuda.jit("float32(float32, float32)", device=True)
def helper(x, y):
    """Docstrings are fine."""
    return cuda.fma(x, y, 1.0) if x > y else math.sqrt(abs(y)) + sqrt(pi)

@cuda.jit(device=True, inline=True)
def spin(n: int = 3) -> float:
    total: float = 0.0
    for k in range(n):
        total += k
    else:
        total -= 1
    return total

@cuda.jit(debug=False, fastmath=True)
def k(out, a, size):
    i, j = cuda.grid(2)
    w, h = cuda.gridsize(2)
    tile = cuda.shared.array((TPB, TPB), dtype=float32)
    scratch = cuda.local.array(4, nb.int32)
    table = cuda.const.array_like(a)
    lane = cuda.threadIdx.x % cuda.warpsize + nb.cuda.blockIdx.y * cuda.blockDim.z + cuda.gridDim.x
    if i >= size or j >= a.shape[0] or a.ndim != 2 or a.size == 0:
        return
    tile[lane % TPB, 0] = float32(a[i, j]) + np.float32(SCALE) * helper(a[i, j], 2.0)
    cuda.syncthreads()
    old = cuda.atomic.add(out, (i, j), tile[0, 0])
    m = max(min(i, j), int(round(float(old))), int32(len(a)))
    while m > 0 and not FLAG:
        m //= 2
        if m == 3:
            break
        elif m == 5:
            continue
        pass
    z = complex(1.0, 2.0)
    n = (q := 3) + z.real + z.imag + pow(2, 3) + divmod(7, 2)[0] + spin()
    for idx, value in enumerate(range(0, TPB, 2)):
        scratch[idx % 4] = value
    assert n > -1, "never"
    if i == 0 and j == 0 and size < 0:
        print("debug", i, f"{j:4d} {n!r}", *scratch[0:2])
        raise NotImplementedError("never")
'''


def test_honest_numba_cuda_constructs_pass_both_paths():
    source = kernel_source_from_cell(HONEST, "k")
    validate_kernel_source(source)
    validate_kernel_source(kernel_source(run_cells(HONEST)["k"])[0])


def test_untouched_stub_passes():
    stub = "@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n    # YOUR CODE HERE\n" \
           "    raise NotImplementedError()\n"
    validate_kernel_source(kernel_source_from_cell(stub, "map_kernel"))


# --- hostile cells are refused, naming the line -------------------------------------------------------

ATTACKS = {
    "os_system_via_import": ("import os\n\n@cuda.jit\ndef k(out, a, size):\n    os.system('touch x')\n",
                             5, "os.system is not available"),
    "import_in_kernel": (KERNEL + "    import os\n", 3, "import inside a kernel"),
    "from_import_in_kernel": (KERNEL + "    from os import system\n", 3, "import inside a kernel"),
    "dunder_import": (KERNEL + "    __import__('os').system('touch x')\n", 3, "__import__"),
    "class_bases_subclasses": (KERNEL + "    s = ().__class__.__bases__[0].__subclasses__()\n", 3,
                               "__class__"),
    "getattr": (KERNEL + "    f = getattr(a, 'tofile')\n", 3, "getattr is not available"),
    "eval": (KERNEL + "    eval('1')\n", 3, "eval is not available"),
    "exec": (KERNEL + "    exec('x = 1')\n", 3, "exec is not available"),
    "open": (KERNEL + "    open('x', 'w').write('1')\n", 3, "open is not available"),
    "type_vars_globals": (KERNEL + "    t = type(a)\n", 3, "type is not available"),
    "globals": (KERNEL + "    g = globals()\n", 3, "globals is not available"),
    "breakpoint": (KERNEL + "    breakpoint()\n", 3, "breakpoint is not available"),
    "cuda_cudadrv_driver_os": (KERNEL + "    cuda.cudadrv.driver.os.system('x')\n", 3,
                               r"cuda\.cudadrv\.driver\.os\.system is not available"),
    "numba_core_config": (KERNEL + "    x = numba.core.config.ENABLE_CUDASIM\n", 3,
                          r"numba\.core\.config\.ENABLE_CUDASIM is not available"),
    "import_numba_core": ("from numba.core import config\n\n" + KERNEL + "    pass\n", 1,
                          r"from numba\.core import config is not available"),
    "np_save": (KERNEL + "    np.save('x', a)\n", 3, r"np\.save is not available"),
    "np_load": (KERNEL + "    b = np.load('x')\n", 3, r"np\.load is not available"),
    "np_fromfile": (KERNEL + "    b = np.fromfile('x')\n", 3, r"np\.fromfile is not available"),
    "np_ctypeslib": (KERNEL + "    p = np.ctypeslib.as_ctypes(a)\n", 3, r"np\.ctypeslib\.as_ctypes"),
    "array_ctypes": (KERNEL + "    p = a.ctypes.data\n", 3, r"a\.ctypes\.data is not available"),
    "array_tofile": (KERNEL + "    a.tofile('x')\n", 3, r"a\.tofile is not available"),
    "str_format_attribute": (KERNEL + "    print('{0.__class__.__init__.__globals__}'.format(a))\n", 3,
                             r"\.format is not available"),
    "fstring_dunder": (KERNEL + "    print(f'{a.__class__}')\n", 3, "__class__"),
    "lambda": (KERNEL + "    f = lambda: 0\n", 3, "lambda is not available"),
    "class_in_kernel": (KERNEL + "    class A:\n        pass\n", 3, "a class is not available"),
    "global": (KERNEL + "    global TPB\n", 3, "global is not available"),
    "nonlocal_like_del": (KERNEL + "    del a\n", 3, "del is not available"),
    "decorator_calls_non_literal": ("@cuda.jit(device=print('x'))\ndef k(out, a, size):\n    pass\n", 1,
                                    "must be a literal"),
    "decorator_positional_call": ("@cuda.jit(open('x'))\ndef k(out, a, size):\n    pass\n", 1,
                                  "must be literals"),
    "decorator_signature_eval": ("@cuda.jit(\"__import__('os').system('x')\")\ndef k(out, a, size):\n"
                                 "    pass\n", 1, "is not a signature"),
    "decorator_link_keyword": ("@cuda.jit(link=['evil.cu'])\ndef k(out, a, size):\n    pass\n", 1,
                               r"@cuda\.jit\(link=\.\.\.\) is not available"),
    "second_decorator": ("@cuda.jit\n@staticmethod\ndef k(out, a, size):\n    pass\n", 3,
                         "exactly one decorator"),
    "default_calls_function": ("@cuda.jit\ndef k(out, a, size, x=print('x')):\n    pass\n", 2,
                               "default value must be a literal"),
    "annotation_calls_function": ("@cuda.jit\ndef k(out: print('x'), a, size):\n    pass\n", 2,
                                  "annotation must be"),
    "return_annotation_calls": ("@cuda.jit\ndef k(out, a, size) -> open('x'):\n    pass\n", 2,
                                "annotation must be"),
    "with_open": (KERNEL + "    with open('x') as f:\n        pass\n", 3, "a with statement"),
    "try": (KERNEL + "    try:\n        pass\n    except Exception:\n        pass\n", 3, "a try statement"),
    "nested_def": (KERNEL + "    def g():\n        pass\n", 3, "a function defined inside a function"),
    "walrus_builtins": (KERNEL + "    y = (x := __builtins__)\n", 3, "__builtins__"),
    "from_numpy_import_load": ("from numpy import load\n\n" + KERNEL + "    load('x')\n", 1,
                               r"numpy\.load is not available"),
    "import_os_as_cuda": ("import os as cuda\n\n@cuda.jit\ndef k(out, a, size):\n    cuda.system('touch x')\n",
                          5, r"cuda\.system is not available"),
    "shadow_module_with_array": (KERNEL + "    np = a\n", 3, "np already names module np"),
    "module_as_value": (KERNEL + "    m = cuda\n", 3, "the module cuda as a value"),
    "attribute_assignment": (KERNEL + "    out.x = 1\n", 3, "assigning to an attribute"),
    "call_a_variable": (KERNEL + "    f = print\n    f(1)\n", 4, "calling the variable f"),
    "call_a_subscript": (KERNEL + "    (print, 1)[0]('x')\n", 3, "can be called"),
    "print_to_a_file": (KERNEL + "    print(a, file=out)\n", 3, r"print\(file=\.\.\.\)"),
    "raise_system_exit": (KERNEL + "    raise SystemExit()\n", 3, "raise SystemExit"),
    "list_comprehension": (KERNEL + "    x = [v for v in range(3)]\n", 3, "a list comprehension"),
    "generator": (KERNEL + "    yield 1\n", 3, "yield is not available"),
    "cuda_jit_inside": (KERNEL + "    f = cuda.jit(a)\n", 3, r"cuda\.jit is not available"),
    "underscore_local": (KERNEL + "    _x = 1\n", 3, "_x is not available"),
    "underscore_keyword": (KERNEL + "    cuda.shared.array(4, _dtype=1)\n", 3, "_dtype"),
    "star_star_call": (KERNEL + "    cuda.syncthreads(**a)\n", 3, r"\*\* in a call"),
    "grader_print_marker": (KERNEL + "    __printing__()\n", 3, "__printing__"),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_attack_in_a_cell_is_refused_naming_its_line(name):
    cell, line, pattern = ATTACKS[name]
    with pytest.raises(KernelSourceError, match=rf"^line {line}: .*{pattern}") as info:
        kernel_source_from_cell(cell, "k")
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


TOP_LEVEL_ATTACKS = {
    "import_os_as_cuda": ("import os as cuda\n", 1, "import os is not available"),
    "import_os": ("from numba import cuda\nimport os\n", 2, "import os is not available"),
    "import_numba_submodule": ("import numba.core.config\n", 1, r"import numba\.core\.config"),
    "constant_from_a_call": ("from numba import cuda\nX = __import__('os').system('x')\n", 2,
                             "X must be a number"),
    "constant_from_an_attribute": ("import numpy as np\nX = np.ctypeslib\n", 2, "X must be a number"),
    "tuple_constant": ("A, B = 1, 2\n", 1, "only number constants"),
    "statement": ("from numba import cuda\nprint('x')\n", 2, "only imports of numba"),
    "if_at_top": ("if True:\n    import os\n", 1, "only imports of numba"),
    "class_at_top": ("class A:\n    pass\n", 1, "a class is not available"),
    "plain_function": ("def f():\n    pass\n", 1, "exactly one decorator"),
    "alias_rebound": ("import numpy as np\nimport math as np\n", 2, "np already names module np"),
    "relative_import": ("from . import cuda\n", 1, r"from \. import cuda"),
    "star_import": ("from math import *\n", 1, r"from math import \*"),
    "future": ("from __future__ import annotations\n", 1, "from __future__ import annotations"),
    "module_shadowed_by_function": ("from numba import cuda\n\n@cuda.jit\ndef np(out):\n    pass\n"
                                    "import numpy as np\n", 6, "np already names a function"),
}


@pytest.mark.parametrize("name", TOP_LEVEL_ATTACKS)
def test_attack_in_a_sent_source_is_refused_naming_its_line(name):
    source, line, pattern = TOP_LEVEL_ATTACKS[name]
    with pytest.raises(KernelSourceError, match=rf"^line {line}: .*{pattern}"):
        validate_kernel_source(source)


def test_constant_computed_by_a_call_is_left_out_of_the_cell_never_run():
    cell = "import os\nX = os.system('touch x')\nTPB = 8\n\n@cuda.jit\ndef k(out, a, size):\n    out[0] = TPB\n"
    source = kernel_source_from_cell(cell, "k")
    assert "system" not in source and "TPB = 8" in source
    with pytest.raises(KernelSourceError, match=r"^line 7: X is not available .*keeps only numbers"):
        kernel_source_from_cell(cell.replace("out[0] = TPB", "out[0] = X"), "k")


def test_line_separators_cannot_smuggle_a_statement_into_the_kernel_text():
    """str.splitlines() also splits at U+2028 and form feeds, Python does not: the kept text follows Python."""
    cell = ("TPB = 8  # \u2028\nopen('smuggled', 'w').write('x')\n@cuda.jit\ndef k(out, a, size):\n"
            "    out[0] = TPB\n    pass\n")
    source = kernel_source_from_cell(cell, "k")
    assert "open(" not in source and "    out[0] = TPB\n    pass" in source


def test_deeply_nested_source_is_refused_not_crashed():
    with pytest.raises(KernelSourceError):
        validate_kernel_source("from numba import cuda\n@cuda.jit\ndef k(out):\n    x = " + "-" * 100_000 + "1\n")


def test_live_kernel_path_names_the_line_in_the_cell():
    ns = run_cells("import os\n\n@cuda.jit\ndef k(out, a, size):\n    i = cuda.threadIdx.x\n"
                   "    os.system('touch x')\n")
    with pytest.raises(KernelSourceError, match=r"^line 6: os\.system is not available"):
        kernel_source(ns["k"])


# --- the grading child refuses on its own, and nothing of the payload runs ----------------------------

def _payloads(marker) -> dict[str, tuple[str, str]]:
    body = "@cuda.jit\ndef map_kernel(out, a, size):\n    i = cuda.threadIdx.x\n"
    return {
        "top_level_os_system": (f"from numba import cuda\nimport os\nos.system('touch {marker}')\n\n{body}"
                                "    out[i] = a[i] + 10\n", "line 2: import os is not available"),
        "kernel_writes_a_file": (f"from numba import cuda\n\n{body}    open('{marker}', 'w').write('x')\n"
                                 "    out[i] = a[i] + 10\n", "line 6: open is not available"),
        "kernel_reaches_os_through_cuda": (f"from numba import cuda\n\n{body}"
                                           f"    cuda.cudadrv.driver.os.system('touch {marker}')\n"
                                           "    out[i] = a[i] + 10\n",
                                           "line 6: cuda.cudadrv.driver.os.system is not available"),
    }


@pytest.mark.parametrize("name", ["top_level_os_system", "kernel_writes_a_file", "kernel_reaches_os_through_cuda"])
def test_grading_child_refuses_a_payload_and_its_side_effect_never_happens(name, tmp_path):
    marker = tmp_path / "pwned"
    source, message = _payloads(marker)[name]
    run = run_source("map", source, "map_kernel", "hidden", "sim")    # straight to the child, unchecked
    assert run.status == "refused" and run.message.startswith(message) and run.cases == 0
    assert not marker.exists()


def test_the_payload_is_real_without_the_check(tmp_path):
    """Control: exec'd and launched in the simulator without the check, the payload does write its file."""
    marker = tmp_path / "pwned"
    source, _ = _payloads(marker)["kernel_writes_a_file"]
    script = ("import numpy as np\nns = {}\nexec(compile(SOURCE, 'payload', 'exec'), ns)\n"
              "ns['map_kernel'][1, 4](np.zeros(4, np.float32), np.ones(4, np.float32), 4)\n")
    subprocess.run([sys.executable, "-c", f"SOURCE = {source!r}\n{script}"], check=True, cwd=ROOT,
                   env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}, capture_output=True, timeout=120)
    assert marker.exists()


def test_grading_child_still_grades_a_reference_kernel_correct():
    puzzle = catalogue.get("shared")
    source = kernel_source_from_cell(strip_solution_markers(REFERENCE[puzzle.id]), puzzle.kernel_name)
    run = run_source(puzzle.id, source, puzzle.kernel_name, "hidden", "sim")
    assert run.ok and run.cases >= 2, run.failure_line()
