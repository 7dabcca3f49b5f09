"""The GEMM worklog without a GPU: the spec, compiling every kernel, the sgemm tolerances, scoring, the
autotuning rules, the notebook, and the refusal to grade (rather than zero) on a machine without a GPU."""
from __future__ import annotations


import nbformat
import pytest

from graders.cuda_engine.compile import CompileError, compile_cuda
from graders.cuda_engine.spec import SpecError, load_spec, resolve_geometry
from graders.cuda_engine.grade import check_compiles
from graders import tracks
from graders.cuda_engine.problems import problem
from graders.settings import ROOT
from workshop.cells import strip_solution_markers

GEMM = tracks.get("gemm").problem_module()
gemm_mismatch = GEMM.gemm_mismatch
from graders.cuda_engine.scoring import score_kernel
from graders.cuda_engine.structure import (check_search, config_problem, expand_space, load_structure, score_autotuned,
                               tune_launch)

SPEC = load_spec("gemm")
WRONG = tracks.get("gemm").wrong_solutions()
STRUCTURE_CHECKS = load_structure("gemm").checks
ORDER = ["naive", "coalesced", "smem", "blocktile1d", "blocktile2d", "vectorized", "linearize", "swizzle",
         "autotuned", "warptiling"]


# --- spec ---------------------------------------------------------------------------------------------

def test_spec_lists_the_ten_kernels_in_order():
    assert list(SPEC.kernels) == ORDER
    assert [k.reference.name for k in SPEC.kernels.values()] == [f"{kid}.cu" for kid in ORDER]
    assert all(k.kind == "sgemm" and k.perf_shape == (4096, 4096, 4096) for k in SPEC.kernels.values())
    assert SPEC.requires_gpu   # whether the targets are measured, and on what records: tests/tracks/test_targets.py
    for kid, kernel in SPEC.kernels.items():
        assert 0 < kernel.floor < kernel.target < 1, kid


def test_sizes_any_for_kernels_1_to_5_and_multiples_for_6_to_10():
    for kid in ORDER[:5]:
        shapes = SPEC.kernel(kid).check_shapes
        assert any(m % 128 or n % 128 or k % 32 for m, n, k in shapes), kid     # not multiples of the tile
        assert (1, 1, 1) in shapes
    for kid in ORDER[5:]:   # multiples of the kernel's own tile (128 x 128, 128 x 256 for warp tiling)
        tile_x, tile_y = SPEC.kernel(kid).geometry.tile
        assert all(m % tile_y == 0 and n % tile_x == 0 and k % 32 == 0 for m, n, k in SPEC.kernel(kid).check_shapes)
        assert any(n % 256 for _, n, _ in SPEC.kernel(kid).check_shapes) == (tile_x == 128), kid


def test_params_become_defines():
    assert SPEC.kernel("smem").geometry.defines()["BK"] == 32
    assert SPEC.kernel("warptiling").geometry.defines() == {"BLOCK_X": 32, "BLOCK_Y": 8, "TILE_X": 256,
                                                            "TILE_Y": 128, "BK": 8, "WM": 64, "WN": 64}
    assert "BK" not in SPEC.kernel("naive").geometry.defines()


def test_params_are_the_students_only_where_the_spec_says_so():
    with pytest.raises(SpecError, match="fixed launch geometry"):
        resolve_geometry(SPEC.kernel("vectorized"), params={"BK": 16})
    tuned = resolve_geometry(SPEC.kernel("autotuned"), (8, 16), (64, 128), {"BK": 32})
    assert tuned.defines() == {"BLOCK_X": 8, "BLOCK_Y": 16, "TILE_X": 64, "TILE_Y": 128, "BK": 32}
    with pytest.raises(SpecError, match="no parameter"):
        resolve_geometry(SPEC.kernel("autotuned"), params={"WM": 64})


def test_bad_params_in_a_spec_are_reported(tmp_path):
    text = (ROOT / "tracks/gemm/spec.toml").read_text().replace("params = { BK = 32 }", "params = { bk = 32 }")
    (tmp_path / "spec.toml").write_text(text)
    with pytest.raises(SpecError, match="parameter name 'bk' must be upper case"):
        load_spec(tmp_path / "spec.toml")


# --- compiling ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel_id", ORDER)
def test_reference_compiles_to_a_cubin_without_spills(kernel_id):
    kernel = SPEC.kernel(kernel_id)
    compiled = compile_cuda(kernel.reference.read_text(), kernels=(kernel.function,),
                            defines=kernel.geometry.defines(), arch="sm_90")
    assert compiled.cubin[:4] == b"\x7fELF"
    usage = compiled.resources[kernel.function]
    assert usage.spill_stores == usage.spill_loads == 0


def test_check_compiles_prints_the_launch_and_params(capsys):
    check_compiles("gemm", "warptiling", SPEC.kernel("warptiling").reference.read_text())
    out = capsys.readouterr()
    assert "Launched as <<<grid, (32, 8)>>>, a 256 x 128 tile per block, BK = 8, WM = 64, WN = 64." in out.out
    assert out.err == ""


@pytest.mark.parametrize("path", [p for p in WRONG if "compile_error" not in tracks.expected_statuses(p)],
                         ids=lambda p: p.stem)
def test_wrong_solutions_compile(path):
    kernel = SPEC.kernel(tracks.graded_kernel(path))
    compile_cuda(path.read_text(), kernels=(kernel.function,), defines=kernel.geometry.defines())


@pytest.mark.parametrize("path", [p for p in WRONG if set(tracks.expected_points(p)) & set(STRUCTURE_CHECKS)],
                         ids=lambda p: p.stem)
def test_wrong_solutions_get_their_structural_points(path):
    """The SASS cells a known-wrong kernel's expect: line names, graded without a GPU."""
    from graders.cuda_engine import sass
    from graders.cuda_engine.grade import KernelFailed
    from graders.cuda_engine.structure import check_sass
    if sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None:
        pytest.skip("needs cuobjdump and nvdisasm")
    for check_id, expected in tracks.expected_points(path).items():
        if check_id in STRUCTURE_CHECKS:
            try:
                points = check_sass("gemm", check_id, path.read_text())
            except KernelFailed:
                points = 0
            assert expected.matches(points), f"{check_id}: {points:g} points, expected {expected}"


def test_broken_kernel_gives_a_readable_error():
    with pytest.raises(CompileError) as info:
        check_compiles("gemm", "naive", (ROOT / "tracks/gemm/solutions/wrong/compile_error.cu").read_text())
    message = str(info.value)
    assert message.startswith("Your CUDA code did not compile:")
    assert 'line 10: error: expected a ";"' in message and "NVRTC_ERROR" not in message


def test_undefined_parameter_is_a_compile_error_naming_it():
    source = 'extern "C" __global__ void sgemm_naive(float* C, const float* A, const float* B, int M, int N, int K)\n' \
             '{ __shared__ float t[BK]; t[0] = 0; C[0] = t[0]; }\n'
    with pytest.raises(CompileError, match='identifier "BK" is undefined'):
        check_compiles("gemm", "naive", source)


# --- the sgemm problem --------------------------------------------------------------------------------

def _product(m, n, k, seed=0):
    import torch
    gen = torch.Generator().manual_seed(seed)
    a, b = problem("sgemm").make_inputs((m, n, k), gen)
    return a, b, problem("sgemm").reference([a, b])


def test_inputs_are_fenced_with_nan():
    import torch
    INPUT_GUARD = GEMM.INPUT_GUARD
    a, b = problem("sgemm").make_inputs((3, 5, 7), torch.Generator().manual_seed(0))
    assert a.shape == (3, 7) and b.shape == (7, 5) and a.is_contiguous()
    assert not torch.isnan(a).any() and not torch.isnan(b).any()
    whole = a.untyped_storage().nbytes() // 4
    assert whole == 3 * 7 + 2 * INPUT_GUARD and a.storage_offset() == INPUT_GUARD
    beyond = torch.empty(0).set_(a.untyped_storage(), INPUT_GUARD + 21, (1,))
    assert torch.isnan(beyond).all()


def test_sgemm_problem_shape_grid_and_work():
    p = problem("sgemm")
    assert p.shape_names == ("M", "N", "K") and p.sizes((3, 5, 7)) == (3, 5, 7)
    assert p.grid((1000, 1030, 77), (128, 64)) == (9, 16, 1)      # x over N, y over M
    assert p.work((4096, 4096, 4096)) == 2 * 4096 ** 3 and p.work_unit == "FLOP"
    assert "TF32 off" in p.baseline_name


def test_fp32_product_passes_and_mistakes_fail():
    import torch
    a, b, expected = _product(300, 200, 1000)
    good = a @ b                                   # fp32, a different summation order from float64
    assert gemm_mismatch(good, expected) == ""
    one_wrong = good.clone()
    one_wrong[17, 3] += 0.05 * float(expected.bound[17, 3] / 1e-3)   # 5% of |A||B| off, one element
    assert "1 of 60000 values outside the fp32 tolerance; first at C[17][3]" in gemm_mismatch(one_wrong, expected)
    unwritten = good.clone()
    unwritten[299, 199] = float("nan")
    message = gemm_mismatch(unwritten, expected)
    assert "1 of 60000 values are NaN (never written, or computed from a read outside A or B" in message
    assert "the first C[299][199]" in message
    dropped = (a[:, :992] @ b[:992]).contiguous()  # the last 8 of K = 1000 products missing
    assert "relative Frobenius error" in gemm_mismatch(dropped, expected) and gemm_mismatch(dropped, expected)
    assert gemm_mismatch(torch.zeros_like(good), expected)


def test_tf32_like_rounding_fails():
    """A kernel on TF32 tensor cores (10-bit mantissa inputs) is not an fp32 SGEMM."""
    import torch
    a, b, expected = _product(128, 128, 512, seed=1)

    def tf32(x):
        return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)
    assert gemm_mismatch(tf32(a) @ tf32(b), expected)


# --- scoring ------------------------------------------------------------------------------------------

def test_scores_follow_the_curve():
    k = SPEC.kernel("warptiling")
    assert score_kernel(k, True, k.target).total == k.points == 5
    assert score_kernel(k, True, k.floor).total == k.points_correct
    mid = score_kernel(k, True, (k.floor + k.target) / 2)
    assert mid.performance == pytest.approx(k.points_perf / 2)
    assert score_kernel(k, False, 2.0).total == 0


# --- autotuning ---------------------------------------------------------------------------------------

def test_tune_launch_maps_a_configuration():
    assert tune_launch({"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4}) == \
        {"block": (16, 16), "tile": (64, 128), "params": {"BK": 16}}


@pytest.mark.parametrize("config, why", [
    ({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 6}, "multiples of 4"),
    ({"BM": 256, "BN": 128, "BK": 8, "TM": 8, "TN": 8}, "divide 128"),
    ({"BM": 128, "BN": 128, "BK": 64, "TM": 8, "TN": 8}, "BK must divide 32"),
    ({"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4}, "1024 threads; allowed") ,
    ({"BM": 128, "BN": 128, "BK": 8, "TM": 8}, "exactly the keys"),
])
def test_invalid_configurations_are_explained(config, why):
    rules = load_structure("gemm").autotune
    if why == "1024 threads; allowed":
        config = {"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4}   # 32 x 32 = 1024 threads: allowed
        assert config_problem(config, rules) == ""
        return
    assert why in config_problem(config, rules)


def test_search_space_needs_enough_configurations_and_the_choice_in_it(capsys):
    source = SPEC.kernel("autotuned").reference.read_text()
    choice = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
    with pytest.raises(AssertionError, match="at least 4"):
        check_search("gemm", source, {"BM": [128], "BN": [128], "BK": [8], "TM": [8], "TN": [8]}, choice)
    with pytest.raises(AssertionError, match="not in the search space"):
        check_search("gemm", source, {"BM": [64, 128], "BN": [64], "BK": [8, 16], "TM": [8], "TN": [8]}, choice)
    assert len(expand_space({"BM": [64, 128], "BN": [64, 128], "BK": [8], "TM": [8], "TN": [4, 8]})) == 8
    assert capsys.readouterr().err == ""


def test_notebook_search_space_passes(capsys):
    cells = _notebook_cells()
    namespace: dict = {}
    exec(strip_solution_markers(cells["autotuned"]), namespace)
    assert check_search("gemm", namespace["autotuned_src"], namespace["autotuned_space"],
                        namespace["autotuned_choice"]) == load_structure("gemm").autotune.points
    assert capsys.readouterr().err == ""


# --- notebook -----------------------------------------------------------------------------------------

def _notebook_cells() -> dict[str, str]:
    """The committed notebook's nbgrader cells (set-up, solutions, checks, hidden tests), by grade_id."""
    nb = nbformat.read(str(tracks.get("gemm").notebook_path), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.source for c in nb.cells if "nbgrader" in c.metadata}


def test_notebook_cells_compile(capsys):
    """Every solution cell compiles through its own check cell (tests/test_tracks.py pins the graded cells and
    the solution cells to the spec and the references); each structural cell checks its own kernel."""
    cells = _notebook_cells()
    namespace: dict = {}
    exec(cells["setup"], namespace)
    for kid in SPEC.kernels:
        exec(strip_solution_markers(cells[kid]), namespace)
        exec(cells[f"{kid}_check"], namespace)          # compiles, prints resources
    for check in load_structure("gemm").checks.values():
        assert f"check_sass('gemm', '{check.id}', {check.kernel}_src)" in cells[check.id]
    assert capsys.readouterr().err == ""


# --- no GPU -------------------------------------------------------------------------------------------

def test_grading_without_a_gpu_refuses_instead_of_scoring_zero(monkeypatch):
    from graders.gpu import NeedsGPUWorker
    monkeypatch.setenv("WORKSHOP_GPU", "0")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    from graders.cuda_engine.grade import score
    with pytest.raises(NeedsGPUWorker):
        score("gemm", "naive", SPEC.kernel("naive").reference.read_text())
    with pytest.raises(NeedsGPUWorker):
        score_autotuned("gemm", SPEC.kernel("autotuned").reference.read_text(),
                        {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8})


def test_hidden_tests_refuse_the_released_stub_without_compiling_it():
    """An empty kernel meets "no spills" and compiles in every configuration: the stub must still score 0."""
    from graders.hidden_tests import HIDDEN_TESTS, TestFailed
    from graders.notebook import CUDA_STUB
    stub = ('extern "C" __global__ void sgemm_blocktile2d(float* C, const float* A, const float* B, int M, int N, '
            f'int K)\n{{\n    {CUDA_STUB}\n}}\n')
    with pytest.raises(TestFailed, match="not written yet"):
        HIDDEN_TESTS["check_sass"]("gemm", "blocktile2d_sass", stub)
    with pytest.raises(TestFailed, match="not written yet"):
        HIDDEN_TESTS["check_search"]("gemm", stub, {"BM": [64]}, {"BM": 64})
