"""SASS checks without a GPU: cuobjdump/nvdisasm from the pip wheels read the compiled GEMM kernels."""
from __future__ import annotations


import pytest

from graders.cuda_engine import sass
from graders.cuda_engine.compile import compile_cuda
from graders.cuda_engine.spec import load_spec
from graders.settings import ROOT
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.structure import check_sass, inspect, load_structure

SPEC = load_spec("gemm")
SCALAR = (ROOT / "tracks/gemm/solutions/wrong/scalar_vectorized.cu").read_text()

pytestmark = pytest.mark.skipif(sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None,
                                reason="needs cuobjdump and nvdisasm (pip install nvidia-cuda-cuobjdump "
                                       "nvidia-cuda-nvdisasm)")

SNIPPET = """
        /*0a20*/                   LDG.E.128.CONSTANT R76, desc[UR8][R76.64] ;      /* 0x000000084c4c7981 */
        /*0a60*/                   STS [R101], R76 ;                                /* 0x0000004c65007388 */
        /*0a70*/              @!P0 LDG.E R3, desc[UR4][R2.64] ;                     /* 0x0000000402038981 */
        /*0a80*/                   LDS.128 R8, [R0+0x200] ;                         /* 0x0002004d65007388 */
        /*0a90*/                   STG.E.64 desc[UR4][R4.64], R6 ;                  /* 0x0006004f65007388 */
        /*0aa0*/                   STL.64 [R1], R42 ;                               /* 0x00 */
        /*0ab0*/                   FFMA R1, R2, R3, R4 ;                            /* 0x00 */
"""


def test_memory_ops_are_parsed_by_kind_and_width():
    assert sass.op_counts(SNIPPET) == {"LDG.128": 1, "LDG.32": 1, "LDS.128": 1, "STG.64": 1, "STL.64": 1,
                                       "STS.32": 1}


def test_tools_are_found_in_the_pip_wheels():
    for name in ("cuobjdump", "nvdisasm"):
        path = sass.find_tool(name)
        assert path.is_file() and path.name == name


def test_tool_override_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKSHOP_CUOBJDUMP", str(tmp_path / "missing"))
    assert sass.find_tool("cuobjdump") is None
    with pytest.raises(sass.SassToolMissing, match="pip install nvidia-cuda-cuobjdump"):
        sass._tool("cuobjdump")


def test_float4_copy_has_128_bit_loads_and_stores():
    source = ('extern "C" __global__ void copy4(float4* __restrict__ o, const float4* __restrict__ i)\n'
              '{ o[threadIdx.x] = i[threadIdx.x]; }')
    ops = sass.op_counts(sass.disassemble(compile_cuda(source).cubin)["copy4"])
    assert ops == {"LDG.128": 1, "STG.128": 1}


def test_vectorized_reference_passes():
    failures, facts = inspect("gemm", "vectorized", SPEC.kernel("vectorized").reference.read_text(),
                              requirements=("ldg128", "no_local", "lds128"))
    assert failures == []
    # the worklog's "8 loads -> 2 loads": per K step each thread issues one float4 load of A and one of B
    assert facts["memory_ops"]["LDG.128"] == 2 and "LDG.32" not in facts["memory_ops"]


def test_scalar_kernel_submitted_as_vectorized_fails_with_a_readable_message(capsys):
    with pytest.raises(KernelFailed, match=r"no 128-bit global load \(LDG.E.128\)"):
        check_sass("gemm", "vectorized_sass", SCALAR)
    out = capsys.readouterr()
    assert "points: 0 / 1" in out.out and "LDG.32" in out.out and out.err == ""


@pytest.mark.parametrize("check_id", sorted(load_structure("gemm").checks))
def test_every_structural_check_passes_its_reference(check_id, capsys):
    check = load_structure("gemm").checks[check_id]
    assert check_sass("gemm", check_id, SPEC.kernel(check.kernel).reference.read_text()) == check.points
    assert capsys.readouterr().err == ""


def test_spills_are_caught():
    source = ('extern "C" __global__ void k(float* o, int i, int n)\n'
              '{ float a[64]; for (int j = 0; j < n; ++j) a[j % 64] = o[j]; o[0] = a[i]; }')
    failures, facts = sass.check(compile_cuda(source).cubin, "k", ("no_local",))
    assert failures and "local memory" in failures[0] and facts["resources"]["STACK"] > 0


def test_compile_error_in_a_structural_check_is_a_failed_check(capsys):
    with pytest.raises(KernelFailed, match="compile_error"):
        check_sass("gemm", "vectorized_sass", 'extern "C" __global__ void sgemm_vectorized() { oops }')
    assert "did not compile" in capsys.readouterr().out
