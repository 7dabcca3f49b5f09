"""The ``no_tensor_cores`` SASS requirement (`graders.cuda_engine.sass`) on hand-written SASS: every tensor-core
opcode of the table is counted, with or without a predicate, and nothing else is; the sentence a student reads.
The ``e4m3`` requirement: QMMA/QGMMA .E4M3, or sm_90's F2FP.F16.E4M3 conversions with HMMA, and nothing else. The
Hopper requirements ``setmaxnreg`` (USETMAXREG both ways), ``multicast`` (UTMALDG.MULTICAST) and ``tma_store``
(UTMASTG), on the lines ptxas writes for them."""
from __future__ import annotations

import pytest

from graders.cuda_engine import sass


def line(address: int, instruction: str) -> str:
    return f"        /*{address:04x}*/                   {instruction} ;"


@pytest.mark.parametrize("opcode", sass.TENSOR_CORE_OPCODES)
@pytest.mark.parametrize("predicate", ["", "@P0 ", "@!P1 ", "@UPT ", "@!UP2 "])
def test_every_tensor_core_opcode_is_counted_predicated_or_not(opcode, predicate):
    text = "\n".join([line(0x10, "FFMA R1, R2, R3, R1"), line(0x20, f"{predicate}{opcode}.16816.F32 R4, R8, R12, R4")])
    assert sass.tensor_core_ops(text) == {opcode: 1}
    assert sass._no_tensor_cores(text, {}) == (
        f"it uses tensor cores (1 x {opcode} in its SASS): this step is about the FP32 pipes (FFMA), so TF32, "
        "3xTF32 or other MMA tricks do not count here; they are the tensor-core track's subject")


@pytest.mark.parametrize("instruction", ["FFMA R1, R2, R3, R1", "HFMA2.MMA R1, R2, R3, R1", "HMNMX2 R1, R2, R3",
                                         "IMAD R1, R2, R3, R1", "LDSM.16.M88.4 R4, [R2]", "MOV R1, 0x0"])
def test_fp32_and_other_instructions_are_not_tensor_cores(instruction):
    text = line(0x10, instruction)
    assert sass.tensor_core_ops(text) == {} and sass._no_tensor_cores(text, {}) == ""


def test_a_mnemonic_outside_an_instruction_line_is_not_counted():
    assert sass.tensor_core_ops("// HMMA.16816.F32 in a comment\n        HMMA.16816 R4, R8, R12, R4 ;") == {}


def test_the_count_is_per_opcode_sorted_and_listed_in_the_sentence():
    text = "\n".join(line(16 * i, op) for i, op in enumerate(
        ["HMMA.1688.F32.TF32 R4, R8, R12, R4", "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24",
         "HMMA.1688.F32.TF32 R4, R8, R12, R4", "@P0 HMMA.1688.F32.TF32 R4, R8, R12, R4"]))
    assert list(sass.tensor_core_ops(text).items()) == [("HGMMA", 1), ("HMMA", 3)]
    assert sass._no_tensor_cores(text, {}).startswith("it uses tensor cores (1 x HGMMA, 3 x HMMA in its SASS): ")


def test_the_requirement_is_in_the_table_with_its_description():
    check, description = sass.REQUIREMENTS["no_tensor_cores"]
    assert check is sass._no_tensor_cores
    assert description == "FP32 pipes only: no tensor-core instructions (HMMA, HGMMA, ...)"


# --- e4m3: fp8 operands on the tensor cores -------------------------------------------------------------

E4M3 = sass.REQUIREMENTS["e4m3"][0]


@pytest.mark.parametrize("instructions", [
    ["QMMA.16832.F32.E4M3.E4M3 R4, R8, R12, R4"],                                    # sm_89, sm_120: mma.sync
    ["@P0 QMMA.16832.F16.E4M3.E4M3 R4, R8, R12, R4"],
    ["QGMMA.64x16x32.F32.E4M3.E4M3 R24, gdesc[UR4], RZ, !UPT, gsb0"],               # sm_90a: wgmma
    ["F2FP.F16.E4M3.UNPACK_B R16, R14", "F2FP.F16.E4M3.UNPACK_B R14, R14.H1",      # sm_90: mma.sync .e4m3
     "HMMA.16816.F32 R4, R4, R16, RZ", "HMMA.16816.F32 R4, R8, R14, R4", "FADD R9, RZ, R4"],
], ids=["qmma", "qmma-f16-predicated", "qgmma", "sm90-f2fp-hmma"])
def test_e4m3_operands_on_the_tensor_cores_pass(instructions):
    assert E4M3("\n".join(line(16 * i, op) for i, op in enumerate(instructions)), {}) == ""


@pytest.mark.parametrize("instructions", [
    ["HMMA.16816.F32 R4, R4, R16, RZ"],                                               # fp16 or bf16 only
    ["F2FP.F16.E4M3.UNPACK_B R16, R14", "FFMA R1, R2, R3, R1"],                       # converted, FP32 pipes
    ["QMMA.16832.F32.E5M2.E5M2 R4, R8, R12, R4"],                                     # the other fp8
    ["F2FP.F16.E5M2.UNPACK_B R16, R14", "HMMA.16816.F32 R4, R4, R16, RZ"],
    ["PRMT R16, R14, 0x7604, RZ", "HMMA.16816.F32 R4, R4, R16, RZ"],                  # converted by hand
], ids=["hmma", "f2fp-ffma", "qmma-e5m2", "f2fp-e5m2-hmma", "bytes-by-hand"])
def test_no_e4m3_path_fails_with_what_sm_90_makes_of_it(instructions):
    text = "\n".join(line(16 * i, op) for i, op in enumerate(instructions))
    assert E4M3(text, {}) == (
        "its SASS shows no e4m3 operands reaching the tensor cores: no QMMA .E4M3, and no F2FP.F16.E4M3 conversion "
        "feeding HMMA (what sm_90, whose mma.sync has no fp8 path, makes of mma.sync .e4m3). Multiply with "
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")


def test_e4m3_in_a_comment_is_no_instruction():
    assert E4M3("// QMMA.16832.F32.E4M3.E4M3 R4, R8, R12, R4\n" + line(0x10, "HMMA.16816.F32 R4, R4, R16, RZ"), {})
    assert sass.REQUIREMENTS["e4m3"][1] == ("e4m3 operands on the tensor cores (QMMA .E4M3; on sm_90, F2FP.F16.E4M3 "
                                            "conversions and fp16 HMMA)")


# --- the Hopper worklog's warp-specialised steps ----------------------------------------------------------

SETMAXNREG, MULTICAST, TMA_STORE = (sass.REQUIREMENTS[r][0] for r in ("setmaxnreg", "multicast", "tma_store"))
RELEASE, CLAIM = "USETMAXREG.DEALLOC.CTAPOOL 0x28", "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8"


def sass_of(*instructions: str) -> str:
    return "\n".join(line(16 * i, op) for i, op in enumerate(instructions))


def test_setmaxnreg_needs_registers_released_and_claimed():
    assert SETMAXNREG(sass_of(RELEASE, "BRA 0x40", CLAIM), {}) == ""
    for one_way in ([RELEASE], [CLAIM], []):
        assert SETMAXNREG(sass_of(*one_way, "EXIT"), {}).startswith("its warpgroups do not move registers: ")


def test_multicast_is_a_multicast_tma_load():
    assert MULTICAST(sass_of("UTMALDG.2D [UR8], [UR12]", "UTMALDG.2D.MULTICAST [UR8], [UR12], UR4"), {}) == ""
    assert MULTICAST(sass_of("UTMALDG.2D [UR8], [UR12]"), {}).startswith(
        "no tile is multicast to the blocks of a cluster: the SASS has no UTMALDG.MULTICAST")


def test_tma_store_is_a_utmastg():
    assert TMA_STORE(sass_of("STS.64 [R3], R4", "UTMASTG.2D [UR12], [UR4]"), {}) == ""
    assert TMA_STORE(sass_of("STG.E.64 desc[UR4][R2.64], R4"), {}).startswith(
        "its tile of C is not stored by the tensor memory accelerator: the SASS has no UTMASTG")
