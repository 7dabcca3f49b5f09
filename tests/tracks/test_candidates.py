"""benchmarks/candidates.py without a GPU: its cases as written on the command line, and the spec copies it grades
them with (the grading itself is `grade_kernel`'s, tested with the engines)."""
from pathlib import Path

import pytest

from benchmarks.candidates import Case, one_line, parse_case, spec_with
from graders.cuda_engine.spec import SpecError, load_spec


def test_a_case_names_a_kernel_and_optionally_a_source_and_spec_lines():
    assert parse_case("hopper:persistent") == Case("hopper", "persistent")
    assert parse_case("cutlass:ws:.sweep/ws.cu") == Case("cutlass", "ws", Path(".sweep/ws.cu"))
    assert parse_case("hopper:pipeline:params={ BK = 64, STAGES = 2 };dynamic_smem=50176") == Case(
        "hopper", "pipeline", None, {"params": "{ BK = 64, STAGES = 2 }", "dynamic_smem": "50176"})
    assert parse_case("hopper:persistent:h.cu;perf_shape=[8192, 8192, 8192]") == Case(
        "hopper", "persistent", Path("h.cu"), {"perf_shape": "[8192, 8192, 8192]"})
    assert parse_case("hopper:tma:dynamic_smem=50176") == Case("hopper", "tma", None, {"dynamic_smem": "50176"})
    for bad in ("hopper", ":persistent", "hopper:persistent;STAGES", "hopper:persistent;=3"):
        with pytest.raises(ValueError):
            parse_case(bad)


def test_the_spec_copy_sets_the_kernels_lines_and_keeps_its_references(tmp_path):
    case = parse_case("hopper:pipeline:params={ BK = 64, STAGES = 2 };dynamic_smem=50176;perf_shape=[8192, 8192, 8192]")
    copy = load_spec(spec_with(case, tmp_path))
    kernel, original = copy.kernel("pipeline"), load_spec("hopper").kernel("pipeline")
    assert dict(kernel.geometry.params) == {"BK": 64, "STAGES": 2} and kernel.launch.dynamic_smem == 50176
    assert kernel.perf_shape == (8192, 8192, 8192) != original.perf_shape   # a key the table lacked: added to it
    assert kernel.reference.read_text() == original.reference.read_text()
    assert copy.kernel("tma") == load_spec("hopper").kernel("tma")   # the other tables untouched
    assert copy.kernel("tma").reference.is_absolute()


def test_a_value_on_several_lines_is_replaced_whole(tmp_path):
    maps = '[{ operand = "A", box = ["BK", "TILE_Y"], swizzle = "128B" }, { operand = "B", box = ["BK", 64], swizzle = "128B" }]'
    kernel = load_spec(spec_with(parse_case(f"hopper:tma;tensor_maps={maps}"), tmp_path)).kernel("tma")
    assert [m.box for m in kernel.launch.tensor_maps] == [("BK", "TILE_Y"), ("BK", 64)]


def test_a_copy_the_spec_refuses_is_refused_before_any_grading(tmp_path):
    with pytest.raises(ValueError, match="no kernel 'nope'"):
        spec_with(parse_case("hopper:nope"), tmp_path)
    with pytest.raises(SpecError):
        spec_with(parse_case("hopper:pipeline;STAGE=2"), tmp_path)   # a misspelt key


def test_one_line_a_case():
    row = {"status": "ok", "message": "", "kernel_rate": 705.4, "unit": "TFLOP/s", "ratio": 0.9912,
           "baseline": "cuBLAS"}
    assert one_line(row) == "ok 705 TFLOP/s, 0.991 of cuBLAS"
    assert one_line({"status": "incorrect", "message": "at shape 1x1x1: wrong"}) == "incorrect at shape 1x1x1: wrong"


def test_launch_once_launches_each_case_as_its_spec_copy_says(tmp_path, monkeypatch):
    """``--launch-once SHAPE`` (for ncu: `gpu_trusted.sh profile-cases`) launches each case once, with its spec
    copy's geometry and its candidate's source, at SHAPE; nothing is graded."""
    import benchmarks.candidates as candidates
    from graders.cuda_engine import launch_child
    launched = []
    monkeypatch.setattr(launch_child, "launch_once", lambda kernel, geometry, source, shape, seed:
                        launched.append((kernel, geometry, source, shape)))
    monkeypatch.setattr(candidates, "grade_case", lambda *args: pytest.fail("--launch-once grades nothing"))
    candidate = tmp_path / "k.cu"
    candidate.write_text("// a candidate")
    assert candidates.main(["--launch-once", "4096x32768", f"nvfp4:registers:{candidate};tile=[512, 16];cluster=[2, 1]",
                            "nvfp4:registers"]) == 0
    (kernel, geometry, source, shape), (_, reference_geometry, reference, _) = launched
    assert kernel.function == "nvfp4_registers" and shape == (4096, 32768) and source == "// a candidate"
    registers = load_spec("nvfp4").kernel("registers")
    assert geometry.tile == (512, 16) and reference_geometry.tile == registers.geometry.tile
    assert reference == registers.reference.read_text()
