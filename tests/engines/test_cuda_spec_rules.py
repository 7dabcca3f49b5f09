"""Every rule of the CUDA spec reader (`graders.cuda_engine.spec`) at its edge, with the whole message.

A value exactly at a limit is accepted and one just past it is refused; messages are compared whole, so a
message that loses where it points (the file, the kernel's number and id) or what it names fails a test.
"""
import copy
from pathlib import Path

import pytest

from graders.cuda_engine.problems import kinds
from graders.cuda_engine.spec import MAX_THREADS, SpecError, make_geometry, parse_spec, resolve_geometry

PATH = Path("/course/tracks/demo/spec.toml")
TOP = f"{PATH} [assignment]"
K1 = f"{PATH} [[kernel]] #1 (k)"
BASE = {
    "assignment": {"name": "demo", "check_shapes": [[4, 4]], "perf_shape": [64, 64], "block": [32, 8],
                   "tile": [32, 32], "points_correct": 1, "points_perf": 2},
    "kernel": [{"id": "k", "function": "k_fn", "kind": "transpose", "floor": 0.1, "target": 0.5}],
}
GEOMETRY_NAMES = "['BLOCK_X', 'BLOCK_Y', 'TILE_X', 'TILE_Y']"


def spec_with(top=None, kernel=None, **tables):
    """BASE with keys of [assignment] and of the first [[kernel]] replaced (a value of None removes the key),
    and whole tables replaced or added."""
    data = copy.deepcopy(BASE)
    for table, changes in ((data["assignment"], top or {}), (data["kernel"][0], kernel or {})):
        for key, value in changes.items():
            table.pop(key) if value is None else table.__setitem__(key, value)
    return parse_spec(data | tables, PATH)


def error(top=None, kernel=None, **tables) -> str:
    """The message of the `SpecError` that `spec_with` raises."""
    with pytest.raises(SpecError) as info:
        spec_with(top, kernel, **tables)
    return str(info.value)


# --- [assignment] -------------------------------------------------------------------------------------

def test_assignment_values_are_read_with_their_defaults():
    spec = spec_with()
    assert (spec.name, spec.path, spec.requires_gpu, spec.time_budget_s, spec.targets) == (
        "demo", PATH, True, 10.0, "provisional")
    spec = spec_with({"requires_gpu": False, "time_budget_s": 2.5, "targets": "measured",
                      "measured_in": ["benchmarks/results/demo.md"]})
    assert (spec.requires_gpu, spec.time_budget_s, spec.targets) == (False, 2.5, "measured")
    assert (spec_with().measured_in, spec.measured_in) == ((), ("benchmarks/results/demo.md",))


def test_measured_targets_and_their_records_come_together():
    needs = (f'{TOP}: targets = "measured" needs measured_in, the records they come from (written by '
             "`workshop targets ... --write`), and only then")
    assert error({"targets": "measured"}) == needs
    assert error({"targets": "measured", "measured_in": []}) == needs
    assert error({"measured_in": ["benchmarks/results/demo.md"]}) == needs
    assert error({"targets": "Measured"}) == f"{TOP}: targets must be 'provisional' or 'measured', not 'Measured'"
    for bad in ("benchmarks/results/demo.md", [3], ["a.md", None]):
        assert error({"targets": "measured", "measured_in": bad}) == (
            f"{TOP}: measured_in must be a list of record paths")


def test_assignment_rules_name_the_assignment_table():
    assert error({"bogus": 1}).startswith(f"{TOP}: unknown key(s) ['bogus']; allowed: ['arch', 'block', ")
    assert error({"name": None}) == f"{TOP}: missing 'name'"
    assert error({"name": 3}) == f"{TOP}: 'name' must be a str, got 3"
    assert error({"requires_gpu": 1}) == f"{TOP}: 'requires_gpu' must be a bool, got 1"


def test_time_budget_must_be_positive():
    assert spec_with({"time_budget_s": 0.001}).time_budget_s == 0.001
    assert error({"time_budget_s": 0}) == f"{TOP}: 'time_budget_s' must be a positive number, got 0"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_numbers_must_be_finite(value):
    """TOML has nan and inf: a budget of nan or a target of inf (full marks out of reach) is refused."""
    assert error({"time_budget_s": value}) == f"{TOP}: 'time_budget_s' must be a positive number, got {value!r}"
    assert error(kernel={"target": value}) == f"{K1}: 'target' must be a positive number, got {value!r}"


def test_kernels_must_be_an_array_of_tables():
    for kernels in ({"id": "k"}, []):
        with pytest.raises(SpecError) as info:
            parse_spec(BASE | {"kernel": kernels}, PATH)
        assert str(info.value) == f"{PATH}: needs at least one [[kernel]] table"


def test_unknown_tables_are_refused():
    assert error(extra={}) == f"{PATH}: unknown table(s) ['extra']"


def test_kernel_messages_give_its_number_and_id():
    second = {"id": "k2", "kind": "transpose", "floor": 0.1, "target": 0.5}
    with pytest.raises(SpecError) as info:
        parse_spec(BASE | {"kernel": [*BASE["kernel"], second]}, PATH)
    assert str(info.value) == f"{PATH} [[kernel]] #2 (k2): missing 'function'"
    assert error(kernel={"id": None}) == f"{PATH} [[kernel]] #1: missing 'id'"


# --- [[kernel]] -------------------------------------------------------------------------------------

def test_kernel_values_are_read():
    kernel = spec_with(kernel={"reference": "solutions/k.cu", "params": {"BK": 8}}).kernel("k")
    assert (kernel.id, kernel.function, kernel.kind) == ("k", "k_fn", "transpose")
    assert kernel.reference == Path("/course/tracks/demo/solutions/k.cu")
    assert kernel.geometry.params == (("BK", 8),)
    assert spec_with().kernel("k").reference is None


def test_kind_must_be_a_known_string():
    assert error(kernel={"kind": 3}) == f"{K1}: 'kind' must be a str, got 3"
    assert error(kernel={"kind": "fft"}) == f"{K1}: unknown kind 'fft'; known kinds: {', '.join(kinds())}"


@pytest.mark.parametrize("value", [5, []])
def test_check_shapes_must_be_a_non_empty_list(value):
    assert error(kernel={"check_shapes": value}) == f"{K1}: check_shapes must be a non-empty list of shapes"


def test_floor_may_be_zero_but_not_negative():
    assert spec_with(kernel={"floor": 0}).kernel("k").floor == 0.0
    assert error(kernel={"floor": -0.01}) == f"{K1}: 'floor' must be a non-negative number, got -0.01"
    assert error(kernel={"floor": None}) == f"{K1}: missing 'floor'"


def test_target_must_be_positive_and_above_the_floor():
    assert spec_with(kernel={"floor": 0.5, "target": 0.5000001}).kernel("k").target == 0.5000001
    assert spec_with(kernel={"floor": 0, "target": 1}).kernel("k").target == 1.0
    assert error(kernel={"floor": 0.5, "target": 0.5}) == f"{K1}: need 0 <= floor < target, got floor=0.5, target=0.5"
    assert error(kernel={"floor": 0, "target": 0}) == f"{K1}: 'target' must be a positive number, got 0"


def test_kernel_field_types_name_the_kernel():
    assert error(kernel={"function": None}) == f"{K1}: missing 'function'"
    assert error(kernel={"student_geometry": "yes"}) == f"{K1}: 'student_geometry' must be a bool, got 'yes'"
    assert error(kernel={"points_correct": -1}) == f"{K1}: 'points_correct' must be a non-negative number, got -1"
    assert error(kernel={"reference": 3}) == f"{K1}: 'reference' must be a str, got 3"
    assert error(kernel={"block": [32]}) == f"{K1} block: expected a list of 2 positive ints, got [32]"
    assert error(kernel={"tile": [32, 0]}) == f"{K1} tile: expected a list of 2 positive ints, got [32, 0]"
    assert error(kernel={"params": {"bk": 8}}) == (
        f"{K1}: parameter name 'bk' must be upper case (A-Z, 0-9, _) and not one of {GEOMETRY_NAMES}")


# --- geometry -----------------------------------------------------------------------------------------

def test_defines_name_each_axis():
    geometry = make_geometry((32, 8), (64, 16), params={"BK": 4})
    assert geometry.defines() == {"BLOCK_X": 32, "BLOCK_Y": 8, "TILE_X": 64, "TILE_Y": 16, "BK": 4}


def test_block_of_exactly_max_threads_is_allowed():
    assert make_geometry((MAX_THREADS, 1), (MAX_THREADS, 1)).block == (1024, 1)
    assert make_geometry((32, 32), (32, 32)).block == (32, 32)
    with pytest.raises(SpecError) as info:
        make_geometry((1025, 1), (1025, 1))
    assert str(info.value) == "geometry: a block of 1025x1 threads is more than 1024"


@pytest.mark.parametrize("block, tile", [((0, 8), (32, 8)), ((32, 8), (0, 8)), ((32, 8), (32, 0))])
def test_block_and_tile_sizes_must_be_positive(block, tile):
    with pytest.raises(SpecError) as info:
        make_geometry(block, tile)
    assert str(info.value) == f"geometry: block and tile sizes must be positive, got block={block}, tile={tile}"


@pytest.mark.parametrize("tile", [(48, 16), (64, 12)])
def test_tile_must_be_a_multiple_of_the_block_on_each_axis(tile):
    with pytest.raises(SpecError) as info:
        make_geometry((32, 8), tile, "here")
    assert str(info.value) == f"here: tile {tile[0]}x{tile[1]} must be a multiple of block 32x8"


def test_params_are_positive_ints_with_upper_case_names():
    assert make_geometry((1, 1), (1, 1), params={"BK": 1, "A_2": 3}).params == (("A_2", 3), ("BK", 1))
    for bad in (0, True, 2.0):
        with pytest.raises(SpecError) as info:
            make_geometry((1, 1), (1, 1), "here", {"BK": bad})
        assert str(info.value) == f"here: parameter BK must be a positive int, got {bad!r}"
    for name in ("bk", "2K", "TILE_X", 7):
        with pytest.raises(SpecError) as info:
            make_geometry((1, 1), (1, 1), "here", {name: 1})
        assert str(info.value) == (
            f"here: parameter name {name!r} must be upper case (A-Z, 0-9, _) and not one of {GEOMETRY_NAMES}")
    assert error(kernel={"params": 3}) == f"{K1}: params must be a table of NAME = int, got 3"


# --- the student's geometry ---------------------------------------------------------------------------

def kernel_spec(student_geometry: bool, params=None):
    changes = {"student_geometry": student_geometry, "block": [32, 8], "tile": [64, 32]}
    return spec_with(kernel=changes | ({"params": params} if params else {})).kernel("k")


def test_fixed_geometry_refuses_any_change_and_says_what_it_is():
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(False), (32, 16), None)
    assert str(info.value) == ("kernel 'k' has a fixed launch geometry (block (32, 8), tile (64, 32)); "
                               "don't pass block, tile or params")
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(False, {"BK": 8}), None, None, {"BK": 8})
    assert str(info.value) == ("kernel 'k' has a fixed launch geometry (block (32, 8), tile (64, 32), "
                               "params {'BK': 8}); don't pass block, tile or params")


def test_student_geometry_keeps_what_is_not_given():
    kernel = kernel_spec(True, {"BK": 8, "BN": 4})
    assert resolve_geometry(kernel) is kernel.geometry
    geometry = resolve_geometry(kernel, None, (64, 64))
    assert (geometry.block, geometry.tile, geometry.params) == ((32, 8), (64, 64), (("BK", 8), ("BN", 4)))
    geometry = resolve_geometry(kernel, (16, 8), None)
    assert (geometry.block, geometry.tile, geometry.params) == ((16, 8), (64, 32), (("BK", 8), ("BN", 4)))
    geometry = resolve_geometry(kernel, None, None, {"BK": 16})
    assert (geometry.block, geometry.tile, geometry.params) == ((32, 8), (64, 32), (("BK", 16), ("BN", 4)))


def test_student_params_must_be_the_specs_names():
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(True, {"BK": 8}), None, None, {"BK": 8, "XX": 1, "AA": 1})
    assert str(info.value) == "kernel 'k' has no parameter(s) ['AA', 'XX']; its parameters: ['BK']"
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(True), None, None, {"BK": 8})
    assert str(info.value) == "kernel 'k' has no parameter(s) ['BK']; its parameters: none"
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(True, {"BK": 8}), None, None, [("BK", 8)])
    assert str(info.value) == "params must be a dict of NAME: int, got [('BK', 8)]"
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(True, {"BK": 8}), None, None, {"BK": 0})
    assert str(info.value) == "kernel 'k': parameter BK must be a positive int, got 0"


@pytest.mark.parametrize("block, tile", [((32.0, 8), None), (None, (64, 32.0)), ((32, 8, 1), None), (None, (64,)),
                                         ((32, True), None), (None, (True, 64))])   # a bool is no int here
def test_student_block_and_tile_are_pairs_of_ints(block, tile):
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(True), block, tile)
    assert str(info.value).startswith("block and tile must be pairs of ints (x, y), got block=")


def test_student_geometry_errors_name_the_kernel():
    with pytest.raises(SpecError) as info:
        resolve_geometry(kernel_spec(True), (32, 8), (48, 32))
    assert str(info.value) == "kernel 'k': tile 48x32 must be a multiple of block 32x8"
