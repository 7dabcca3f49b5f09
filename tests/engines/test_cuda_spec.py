import re
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import is_solution

from graders import tracks
from graders.cuda_engine.spec import SpecError, load_spec, parse_spec, resolve_geometry
from workshop.cells import strip_solution_markers

GOOD = """
[assignment]
name = "demo"
check_shapes = [[4, 4], [5, 3]]
perf_shape = [64, 64]
block = [32, 8]
tile = [32, 32]
points_correct = 1
points_perf = 2

[[kernel]]
id = "k"
function = "k_fn"
kind = "transpose"
floor = 0.1
target = 0.5
"""


def load_text(tmp_path: Path, text: str):
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return load_spec(path)


def test_transpose_spec_lists_the_ladder():
    spec = load_spec("transpose")
    assert list(spec.kernels) == ["copy", "naive", "tiled", "padded", "best"]
    assert spec.requires_gpu
    for kernel in spec.kernels.values():
        assert kernel.reference is not None and kernel.reference.exists()
        assert kernel.floor < kernel.target
        shapes = kernel.check_shapes
        assert any(r != c for r, c in shapes), "needs a non-square shape"
        assert any(r % 32 and c % 32 for r, c in shapes), "needs a shape that is not a multiple of 32"
    assert spec.kernel("naive").geometry.tile == (32, 8)
    assert spec.kernel("tiled").geometry.elements_per_thread == 4
    assert spec.kernel("best").student_geometry and not spec.kernel("padded").student_geometry


def test_defaults_are_inherited_and_overridable(tmp_path):
    spec = load_text(tmp_path, GOOD.replace('kind = "transpose"', 'kind = "transpose"\npoints_perf = 5'))
    kernel = spec.kernel("k")
    assert kernel.check_shapes == ((4, 4), (5, 3))
    assert kernel.points == 6
    assert spec.time_budget_s == 10.0


@pytest.mark.parametrize("change, message", [
    (('kind = "transpose"', 'kind = "fft"'), "unknown kind 'fft'"),
    (('floor = 0.1', 'floor = 0.7'), "floor < target"),
    (('function = "k_fn"', 'fuction = "k_fn"'), "unknown key(s) ['fuction']"),
    (('id = "k"', ''), "missing 'id'"),
    (('block = [32, 8]', 'block = [64, 32]'), "more than 1024"),
    (('tile = [32, 32]', 'tile = [32, 20]'), "must be a multiple of block"),
    (('perf_shape = [64, 64]', 'perf_shape = [64]'), "perf_shape: expected a list of 2 positive ints"),
    (('check_shapes = [[4, 4], [5, 3]]', 'check_shapes = [[4, 0]]'), "check_shapes: expected"),
    (('points_perf = 2', 'points_perf = "two"'), "'points_perf' must be a non-negative number"),
    (('[assignment]', '[assignmen]'), "needs an [assignment] table"),
    (('name = "demo"', 'name = "demo"\ntargets = "guessed"'), "targets must be"),
])
def test_bad_specs_say_what_is_wrong(tmp_path, change, message):
    with pytest.raises(SpecError) as info:
        load_text(tmp_path, GOOD.replace(*change))
    assert message in str(info.value)
    assert "spec.toml" in str(info.value)


def test_duplicate_ids_and_syntax_errors(tmp_path):
    kernel_table = GOOD[GOOD.index("[[kernel]]"):]
    with pytest.raises(SpecError, match="duplicate id 'k'"):
        load_text(tmp_path, GOOD + kernel_table)
    with pytest.raises(SpecError, match="not valid TOML"):
        load_text(tmp_path, GOOD + "\nbroken = [")
    with pytest.raises(SpecError, match="no spec file"):
        load_spec(tmp_path / "missing.toml")
    with pytest.raises(SpecError, match="needs at least one"):
        parse_spec({"assignment": {"name": "x"}}, tmp_path / "spec.toml")


def test_unknown_kernel_lists_the_known_ones():
    with pytest.raises(SpecError, match="kernels: copy, naive, tiled, padded, best"):
        load_spec("transpose").kernel("fastest")


def test_student_geometry_only_where_allowed():
    spec = load_spec("transpose")
    assert resolve_geometry(spec.kernel("best"), (32, 16), (64, 64)).elements_per_thread == 8
    assert resolve_geometry(spec.kernel("best"), None, None).block == (32, 8)
    assert resolve_geometry(spec.kernel("best"), None, None).tile == (64, 64)
    with pytest.raises(SpecError, match="fixed launch geometry"):
        resolve_geometry(spec.kernel("padded"), (32, 16), None)
    with pytest.raises(SpecError, match="multiple of block"):
        resolve_geometry(spec.kernel("best"), (32, 8), (48, 36))
    with pytest.raises(SpecError, match="pairs of ints"):
        resolve_geometry(spec.kernel("best"), (32, 8, 1), None)


def _notebook() -> nbformat.NotebookNode:
    """The committed transpose notebook (tests/test_tracks.py pins its graded cells and solution cells to the
    spec and the references)."""
    return nbformat.read(str(tracks.get("transpose").notebook_path), as_version=4)


def _solutions(nb: nbformat.NotebookNode) -> dict[str, str]:
    return {c.metadata.nbgrader["grade_id"]: strip_solution_markers(c.source) for c in nb.cells if is_solution(c)}


def test_notebook_solution_cells_compile(capsys):
    from graders.cuda_engine.grade import check_compiles
    solutions = _solutions(_notebook())
    namespace: dict = {}
    for kid, kernel in load_spec("transpose").kernels.items():
        exec(solutions[kid], namespace)
        check_compiles("transpose", kid, namespace[f"{kid}_src"],
                       **({"block": namespace["best_block"], "tile": namespace["best_tile"]}
                          if kernel.student_geometry else {}))
    assert capsys.readouterr().err == ""


def test_notebook_states_the_specs_speeds_and_default_geometry():
    nb = _notebook()
    spec = load_spec("transpose")
    speeds = re.findall(r"\* speed: full marks at ([\d.]+) of the copy's speed, none below ([\d.]+)",
                        "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    assert speeds == [(f"{k.target:g}", f"{k.floor:g}") for k in spec.kernels.values()]
    best = _solutions(nb)["best"]
    assert f"best_block = {spec.kernel('best').geometry.block}" in best
    assert f"best_tile = {spec.kernel('best').geometry.tile}" in best
