"""Structural checks and the autotuning search (`graders.cuda_engine.structure`), every rule at its edge, without a
compiler: the sandboxed compile child (`inspect_launches`) is replaced where a test is about the rule, not the SASS."""
from __future__ import annotations

import dataclasses

import pytest

from graders import hidden_tests
from graders.cuda_engine import grade, sass, structure
from graders.cuda_engine.compile import CompileError
from graders.cuda_engine.grade import KernelFailed
from graders.cuda_engine.spec import SpecError
from graders.result import GradeResult, Status
from graders.sandbox.run import ChildResult

GEMM = structure.load_structure("gemm")
RULES = GEMM.autotune
BASE = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}   # 256 threads, 8 KiB of shared memory: valid


def threads(config: dict) -> int:
    return (config["BM"] // config["TM"]) * (config["BN"] // config["TN"])


def shared_bytes(config: dict) -> int:
    return 4 * config["BK"] * (config["BM"] + config["BN"])


def test_the_gemm_rules_are_read_from_its_structure_file():
    assert RULES == structure.AutotuneRules("autotuned", "autotuned_search", 1.0, 4, 48, 128, 32, 1024, 32, 49152)
    assert set(GEMM.checks) == {"blocktile2d_sass", "vectorized_sass", "warptiling_sass"}
    assert GEMM.checks["vectorized_sass"] == structure.Check("vectorized_sass", "vectorized", ("ldg128", "no_local"),
                                                             1.0)
    assert GEMM.path == structure.structure_path("gemm") and GEMM.path.name == "structure.toml"


# --- config_problem: each rule exactly at its bound passes, one step past it fails with its message ----------

def test_the_base_configuration_is_valid():
    assert structure.config_problem(BASE, RULES) == ""


@pytest.mark.parametrize("change", [{"BM": None}, {"XX": 8}], ids=["a-key-missing", "a-key-extra"])
def test_a_configuration_has_exactly_the_five_keys(change):
    config = {k: v for k, v in (BASE | change).items() if v is not None}
    assert structure.config_problem(config, RULES) == (
        f"a configuration has exactly the keys BM, BN, BK, TM, TN; got {sorted(config)}")


@pytest.mark.parametrize("key", structure.TUNABLE)
@pytest.mark.parametrize("value", [0, -8, True, 8.0, "8"])
def test_every_value_is_a_positive_int(key, value):
    assert structure.config_problem(BASE | {key: value}, RULES) == "every value must be a positive int"


@pytest.mark.parametrize("key", ["TM", "TN", "BK"])
def test_tm_tn_and_bk_are_each_multiples_of_4(key):
    assert structure.config_problem(BASE | {key: 4}, RULES) == ""
    assert structure.config_problem(BASE | {key: 2}, RULES) == "TM, TN and BK must be multiples of 4 (float4 loads)"


@pytest.mark.parametrize("tile, thread", [("BM", "TM"), ("BN", "TN")])
def test_a_block_tile_is_a_multiple_of_its_thread_tile(tile, thread):
    assert structure.config_problem(BASE | {tile: 64, thread: 16}, RULES) == ""
    assert structure.config_problem(BASE | {tile: 128, thread: 12}, RULES) == "BM must be a multiple of TM and BN of TN"


@pytest.mark.parametrize("key", ["BM", "BN"])
def test_a_block_tile_divides_128_and_is_at_most_max_tile(key):
    message = f"BM and BN must divide 128 (at most {RULES.max_tile}): the grader's M and N are multiples of 128"
    assert structure.config_problem(BASE | {key: 96}, RULES) == message            # <= 128, does not divide it
    assert structure.config_problem(BASE | {key: 256, "TM": 8, "TN": 8}, RULES) == message
    smaller = dataclasses.replace(RULES, max_tile=64)
    assert structure.config_problem(BASE | {"BM": 64, "BN": 64}, smaller) == ""   # exactly max_tile
    assert structure.config_problem(BASE | {"BM": 64, "BN": 64} | {key: 128}, smaller) == message.replace("128)", "64)")


def test_bk_divides_32_and_is_at_most_max_bk():
    message = f"BK must divide 32 (at most {RULES.max_bk}): the grader's K is a multiple of 32"
    assert structure.config_problem(BASE | {"BK": 32}, RULES) == ""
    assert structure.config_problem(BASE | {"BK": 12}, RULES) == message          # a multiple of 4 not dividing 32
    assert structure.config_problem(BASE | {"BK": 64}, RULES) == message
    smaller = dataclasses.replace(RULES, max_bk=16)
    assert structure.config_problem(BASE | {"BK": 16}, smaller) == ""
    assert structure.config_problem(BASE | {"BK": 32}, smaller) == message.replace("most 32", "most 16")


def test_the_thread_count_is_allowed_exactly_at_both_bounds():
    n = threads(BASE)
    for low, high in [(n, n), (n - 1, n + 1)]:
        assert structure.config_problem(BASE, dataclasses.replace(RULES, min_threads=low, max_threads=high)) == ""
    for low, high in [(n + 1, 2 * n), (1, n - 1)]:
        assert structure.config_problem(BASE, dataclasses.replace(RULES, min_threads=low, max_threads=high)) == (
            f"(BM / TM) * (BN / TN) = {n} threads; allowed {low} to {high}")


def test_the_real_thread_bounds():
    fewest = BASE | {"BM": 32, "BN": 32, "TM": 4, "TN": 4}               # 8 x 8 = 64
    assert structure.config_problem(fewest | {"BN": 16}, RULES) == ""    # 8 x 4 = 32: exactly min_threads
    assert "= 16 threads; allowed 32 to 1024" in structure.config_problem(fewest | {"BN": 16, "BM": 16}, RULES)
    assert structure.config_problem(BASE | {"TM": 4, "TN": 4}, RULES) == ""   # 32 x 32 = 1024: exactly max_threads


def test_shared_memory_is_allowed_exactly_at_its_bound():
    need = shared_bytes(BASE)
    assert structure.config_problem(BASE, dataclasses.replace(RULES, max_shared_bytes=need)) == ""
    assert structure.config_problem(BASE, dataclasses.replace(RULES, max_shared_bytes=need - 1)) == (
        f"4 * BK * (BM + BN) = {need} B of shared memory; at most {need - 1}")


def test_tune_launch_maps_every_field():
    assert structure.tune_launch({"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8}) == \
        {"block": (16, 16), "tile": (128, 64), "params": {"BK": 16}}
    assert structure.tune_launch({"BM": 128, "BN": 32, "BK": 4, "TM": 16, "TN": 4}) == \
        {"block": (8, 8), "tile": (32, 128), "params": {"BK": 4}}


# --- the search space -----------------------------------------------------------------------------------

def test_a_space_expands_to_every_combination_in_order():
    space = {"BM": [64, 128], "BN": (32,), "BK": 8, "TM": [4, 8], "TN": [4]}
    assert structure.expand_space(space) == [
        {"BM": 64, "BN": 32, "BK": 8, "TM": 4, "TN": 4}, {"BM": 64, "BN": 32, "BK": 8, "TM": 8, "TN": 4},
        {"BM": 128, "BN": 32, "BK": 8, "TM": 4, "TN": 4}, {"BM": 128, "BN": 32, "BK": 8, "TM": 8, "TN": 4}]


@pytest.mark.parametrize("space", [[1, 2], {"BM": [64]}, dict.fromkeys([*structure.TUNABLE, "XX"], [8])])
def test_a_space_that_is_not_the_five_keys_is_refused(space):
    with pytest.raises(ValueError) as raised:
        structure.expand_space(space)
    assert str(raised.value) == "the search space maps each of BM, BN, BK, TM, TN to a list of values"


@pytest.fixture
def search(monkeypatch):
    """`search_problems` with the GEMM rules (changed per test through ``rules``) and a stand-in compile child
    that reports ``failures[i]`` for the i-th launch (none by default)."""
    state = {"rules": RULES, "calls": [], "failures": {}, "error": None}
    monkeypatch.setattr(structure, "load_structure",
                        lambda assignment: structure.Structure(GEMM.path, GEMM.checks, state["rules"]))

    def inspect_launches(assignment, kernel_id, source, launches, **options):
        state["calls"].append((assignment, kernel_id, source, launches, options))
        if state["error"]:
            raise CompileError(state["error"])
        return [(state["failures"].get(i, []), {}) for i in range(len(launches))]
    monkeypatch.setattr(structure, "inspect_launches", inspect_launches)
    return state


def space_of(n: int) -> dict:
    """A space whose first min(n, 5) configurations are valid (BASE first); TN of 128, 12 and 20 are not."""
    return {"BM": [128], "BN": [128], "BK": [8], "TM": [8], "TN": [8, 4, 16, 32, 64, 128, 12, 20][:n]}


def test_the_number_of_valid_configurations_is_allowed_exactly_at_both_bounds(search):
    search["rules"] = dataclasses.replace(RULES, min_configs=3, max_configs=3)
    space = space_of(3)
    assert structure.search_problems("gemm", "src", space, BASE) == ([], structure.expand_space(space))
    (assignment, kernel_id, source, launches, options), = search["calls"]
    assert (assignment, kernel_id, source) == ("gemm", "autotuned", "src")
    assert launches == [structure.tune_launch(c) for c in structure.expand_space(space)]
    assert options == {"requirements": ("no_local",), "disassemble": False}
    search["rules"] = dataclasses.replace(RULES, min_configs=4, max_configs=4)
    assert structure.search_problems("gemm", "src", space, BASE)[0] == [
        "the search space has 3 valid configuration(s); at least 4 are needed"]
    search["rules"] = dataclasses.replace(RULES, min_configs=2, max_configs=2)
    assert structure.search_problems("gemm", "src", space, BASE)[0] == [
        "the search space has 3 valid configurations; at most 2"]
    assert len(search["calls"]) == 1     # nothing is compiled once the space or the choice is wrong


def test_too_few_valid_configurations_lists_the_invalid_ones(search):
    space = space_of(8)
    problems, valid = structure.search_problems("gemm", "src", space, BASE)
    assert problems == [] and valid == structure.expand_space(space_of(5))
    search["rules"] = dataclasses.replace(RULES, min_configs=6)
    problems, _ = structure.search_problems("gemm", "src", space, BASE)
    invalid = structure.expand_space(space)[5:]
    examples = "; ".join(f"{c}: {structure.config_problem(c, RULES)}" for c in invalid)
    assert len(examples) < 400
    assert problems == [f"the search space has 5 valid configuration(s); at least 6 are needed (invalid: {examples})"]


def test_the_list_of_invalid_configurations_is_cut_at_400_characters(search):
    space = {"BM": [128], "BN": [128], "BK": [8], "TM": [8], "TN": [8, 4, 12, 20, 28, 36, 44, 52]}
    search["rules"] = dataclasses.replace(RULES, min_configs=3)
    problem = structure.search_problems("gemm", "src", space, BASE)[0][0]
    listed = problem.split("(invalid: ", 1)[1][:-1]
    assert len(listed) == 400


@pytest.mark.parametrize("choice, why", [
    ([128, 128, 8, 8, 8], "the choice must be a dict"),
    (BASE | {"TM": 6}, "TM, TN and BK must be multiples of 4 (float4 loads)"),
])
def test_a_choice_that_cannot_be_launched_says_why(search, choice, why):
    problems, _ = structure.search_problems("gemm", "src", space_of(4), choice)
    assert problems == [f"the choice {choice} cannot be launched: {why}"]


def test_the_choice_must_be_in_the_space(search):
    choice = BASE | {"BK": 16}
    assert structure.search_problems("gemm", "src", space_of(4), choice)[0] == [
        f"the choice {choice} is not in the search space"]


def test_a_space_that_does_not_compile_is_a_problem(search):
    search["error"] = "at {'block': [16, 16]}: line 3: error"
    assert structure.search_problems("gemm", "src", space_of(4), BASE)[0] == [
        "a configuration does not compile at {'block': [16, 16]}: line 3: error"]


def test_a_spilling_choice_fails_and_another_spilling_configuration_is_a_note(search):
    configs = structure.expand_space(space_of(4))
    search["failures"] = {0: ["it uses local memory (a 16-byte stack frame): registers spilled"],
                          2: ["it uses local memory (2 local load/store instruction(s)): more"]}
    assert structure.search_problems("gemm", "src", space_of(4), BASE)[0] == [
        f"the chosen configuration {BASE}: it uses local memory (a 16-byte stack frame): registers spilled",
        f"note: configuration {configs[2]} spills (it uses local memory (2 local load/store instruction(s)))"]


def test_check_search_fails_on_problems_not_on_notes(search, capsys):
    configs = structure.expand_space(space_of(4))
    search["failures"] = {2: ["it uses local memory (x): y"]}
    assert structure.check_search("gemm", "src", space_of(4), BASE) == RULES.points
    assert capsys.readouterr().out == (
        f"autotuned_search: ok: 4 valid configuration(s); choice {BASE}\n"
        f"  · note: configuration {configs[2]} spills (it uses local memory (x))\n  points: 1 / 1\n")
    search["failures"] = {0: ["it uses local memory (x): y"]}
    with pytest.raises(KernelFailed) as failed:
        structure.check_search("gemm", "src", space_of(4), BASE)
    assert str(failed.value) == f"autotuned_search: the chosen configuration {BASE}: it uses local memory (x): y"
    assert capsys.readouterr().out == (
        f"autotuned_search: unmet: 4 valid configuration(s); choice {BASE}\n"
        f"  ✗ the chosen configuration {BASE}: it uses local memory (x): y\n  points: 0 / 1\n")


# --- the SASS checks and the compile child ------------------------------------------------------------------

FACTS = {"memory_ops": {"LDG.128": 4, "STG.32": 1}, "resources": {"REG": 40, "STACK": 8, "LOCAL": 16}}


def test_describe_lists_the_memory_instructions_and_resources():
    assert structure.describe(FACTS) == ("memory instructions: 4 x LDG.128, 1 x STG.32; 40 registers, 8 B stack, "
                                         "16 B local")
    assert structure.describe({"memory_ops": {}, "resources": {}}) == ("memory instructions: none; ? registers, "
                                                                       "0 B stack, 0 B local")


@pytest.fixture
def inspected(monkeypatch):
    """`check_sass` with a stand-in `inspect`: ``state["answer"]`` is what it returns (or raises)."""
    state = {"answer": ([], FACTS), "calls": []}

    def inspect(assignment, kernel_id, source, **options):
        state["calls"].append((assignment, kernel_id, source, options))
        if isinstance(state["answer"], Exception):
            raise state["answer"]
        return state["answer"]
    monkeypatch.setattr(structure, "inspect", inspect)
    return state


def test_a_structural_check_that_passes_prints_what_was_wanted_and_found(inspected, capsys):
    assert structure.check_sass("gemm", "vectorized_sass", "src", block=(16, 16)) == 1.0
    assert inspected["calls"] == [("gemm", "vectorized", "src", {"requirements": ("ldg128", "no_local"),
                                                                 "block": (16, 16)})]
    assert capsys.readouterr().out == (
        "vectorized_sass: ok (wanted: 128-bit global loads (LDG.E.128); no register spills or other local memory)\n"
        f"  {structure.describe(FACTS)}\n  points: 1 / 1\n")


def test_a_structural_check_that_fails_names_each_failure(inspected, capsys):
    inspected["answer"] = (["no LDG.128", "a stack frame"], FACTS)
    with pytest.raises(KernelFailed) as failed:
        structure.check_sass("gemm", "vectorized_sass", "src")
    assert str(failed.value) == "vectorized_sass: no LDG.128; a stack frame"
    out = capsys.readouterr().out
    assert out.startswith("vectorized_sass: unmet (wanted: ")
    assert out.endswith("  ✗ no LDG.128\n  ✗ a stack frame\n  points: 0 / 1\n")


def test_a_structural_check_that_does_not_compile_is_a_compile_error(inspected, capsys):
    inspected["answer"] = CompileError("line 3: error")
    with pytest.raises(KernelFailed) as failed:
        structure.check_sass("gemm", "vectorized_sass", "src")
    assert str(failed.value) == "vectorized_sass: compile_error: line 3: error"
    assert capsys.readouterr().out == "vectorized_sass: compile_error - line 3: error\n"


@pytest.fixture
def compile_child(monkeypatch):
    """`inspect_launches` with a stand-in sandboxed child answering ``state["child"]``."""
    state = {"child": None, "calls": []}

    def run_child(handler, request, **options):
        state["calls"].append((handler, request, options))
        return state["child"]
    monkeypatch.setattr(structure, "run_child", run_child)
    return state


LAUNCHES = [{"block": (16, 16), "tile": None, "params": {"BK": 8}}, {"tile": (64, 64)}]


def test_each_launch_is_sent_to_the_compile_child_as_json(compile_child):
    compile_child["child"] = ChildResult("ok", answer={"results": [{"failures": ["f"], "facts": {"a": 1}},
                                                                   {"failures": [], "facts": {}}]})
    found = structure.inspect_launches("gemm", "vectorized", "src", LAUNCHES, requirements=("ldg128",))
    assert found == [(["f"], {"a": 1}), ([], {})]
    (handler, request, options), = compile_child["calls"]
    assert handler == "graders.cuda_engine.structure_child" and options == {"timeout_s": 2 * 60.0}
    assert request == {"spec_path": str(structure.spec_path("gemm").resolve()), "kernel_id": "vectorized",
                       "source": "src", "launches": [{"block": [16, 16], "params": {"BK": 8}}, {"tile": [64, 64]}],
                       "requirements": ["ldg128"], "disassemble": True}
    structure.inspect_launches("gemm", "vectorized", "src", [], disassemble=False)
    assert compile_child["calls"][-1][2] == {"timeout_s": 60.0}
    assert compile_child["calls"][-1][1]["disassemble"] is False


@pytest.mark.parametrize("child, launches, message", [
    (ChildResult("timeout", message="no answer in 60 s"), LAUNCHES[:1], "the compiler was timeout: no answer in 60 s"),
    (ChildResult("ok", answer={"error": "KeyError: 'x'"}), LAUNCHES[:1], "the structure check failed: KeyError: 'x'"),
    (ChildResult("ok", answer={"results": [{"compile_error": "line 3: error"}]}), LAUNCHES[:1], "line 3: error"),
    (ChildResult("ok", answer={"results": [{"failures": [], "facts": {}}, {"compile_error": "line 3: error"}]}),
     LAUNCHES, "at {'tile': [64, 64]}: line 3: error"),
])
def test_a_child_that_does_not_compile_raises_a_compile_error(compile_child, child, launches, message):
    compile_child["child"] = child
    with pytest.raises(CompileError) as raised:
        structure.inspect_launches("gemm", "vectorized", "src", launches)
    assert str(raised.value) == message


def test_inspect_is_one_launch_of_inspect_launches(compile_child):
    compile_child["child"] = ChildResult("ok", answer={"results": [{"failures": ["f"], "facts": {"a": 1}}]})
    assert structure.inspect("gemm", "vectorized", "src", requirements=("no_local",), disassemble=False,
                             block=(8, 8)) == (["f"], {"a": 1})
    request = compile_child["calls"][0][1]
    assert request["launches"] == [{"block": [8, 8]}] and request["requirements"] == ["no_local"]
    assert request["disassemble"] is False


# --- the autotuned kernel's score and the GPU search ------------------------------------------------------

def test_an_unlaunchable_choice_is_refused_before_grading(monkeypatch, capsys):
    monkeypatch.setattr(grade, "score", lambda *a, **k: pytest.fail("graded an unlaunchable choice"))
    choice = BASE | {"TM": 6}
    line = f"autotuned: refused: the choice {choice} cannot be launched: TM, TN and BK must be multiples of 4 " \
           "(float4 loads)"
    with pytest.raises(KernelFailed) as failed:
        structure.score_autotuned("gemm", "src", choice)
    assert str(failed.value) == line and capsys.readouterr().out == line + "\n"
    with pytest.raises(KernelFailed, match="the choice must be a dict"):
        structure.score_autotuned("gemm", "src", [1, 2])


def test_a_launchable_choice_is_graded_at_its_launch(monkeypatch):
    calls = []
    monkeypatch.setattr(grade, "score", lambda *a, **k: calls.append((a, k)) or 2.5)
    assert structure.score_autotuned("gemm", "src", BASE, budget_s=1.0) == 2.5
    assert calls == [(("gemm", "autotuned", "src"), structure.tune_launch(BASE) | {"budget_s": 1.0})]


def test_a_launchable_choice_is_prepared_at_its_launch_and_an_unlaunchable_one_not(monkeypatch):
    """The autotuned kernel's compute-sanitizer runs, prepared before the submission's kernels are timed, are of
    the launch its test grades (`grade.prepare`'s findings stand in only for the same launch)."""
    calls = []
    monkeypatch.setattr(grade, "prepare", lambda *a, **k: calls.append((a, k)) or "prepared")
    assert hidden_tests.PREPARE["score_autotuned"]("gemm", "src", BASE, budget_s=1.0) == "prepared"
    assert calls == [(("gemm", "autotuned", "src"), structure.tune_launch(BASE) | {"budget_s": 1.0})]
    assert structure.prepare_autotuned("gemm", "src", BASE | {"TM": 6}) is None
    assert structure.prepare_autotuned("gemm", "src", [1, 2]) is None and len(calls) == 1


def graded(status: Status, ratio: float | None) -> GradeResult:
    timing = {"ratio": ratio, "kernel": {"throughput": 2e12}} if ratio is not None else {}
    return GradeResult("autotuned", status, "wrong" if status != Status.OK else "", points=1, max_points=3,
                       target="gpu", details={"timing": timing} if timing else {})


def test_autotune_picks_the_fastest_correct_configuration(monkeypatch, capsys):
    results = {4: graded(Status.OK, 0.5), 8: graded(Status.OK, 0.7), 16: graded(Status.INCORRECT, None)}
    calls = []

    def grade_kernel(assignment, kernel_id, source, budget_s, **launch):
        calls.append((kernel_id, budget_s, launch))
        return results[launch["tile"][0] // launch["block"][0]]     # by TN
    monkeypatch.setattr(grade, "grade_kernel", grade_kernel)
    space = {"BM": [128], "BN": [128], "BK": [8], "TM": [8], "TN": [4, 8, 16, 6]}
    best, rows = structure.autotune("gemm", "src", space, budget_s=0.25)
    assert best == BASE and [r["status"] for r in rows] == ["ok", "ok", "incorrect", "refused"]
    assert rows[1] == {"config": BASE, "status": "ok", "message": "", "ratio": 0.7, "gflops": 2000.0}
    assert rows[2]["message"] == "incorrect: wrong" and rows[2]["gflops"] is None
    assert rows[3]["message"] == "TM, TN and BK must be multiples of 4 (float4 loads)"
    assert calls[0] == ("autotuned", 0.25, structure.tune_launch(BASE | {"TN": 4}))
    assert capsys.readouterr().out.splitlines()[1] == f"{BASE}: ok, 2000 GFLOP/s, 0.700 of cuBLAS"
    results[4] = results[8] = graded(Status.INCORRECT, None)
    with pytest.raises(RuntimeError, match="no configuration of the space was correct"):
        structure.autotune("gemm", "src", space)


def test_autotune_records_every_configuration_in_order_and_grades_each_with_its_own_launch(monkeypatch, capsys):
    calls = []

    def grade_kernel(assignment, kernel_id, source, budget_s, **launch):
        calls.append((assignment, kernel_id, source, budget_s, launch))
        return graded(Status.OK, 0.5) if launch["tile"][0] // launch["block"][0] == 8 else graded(Status.TIMEOUT,
                                                                                                    None)
    monkeypatch.setattr(grade, "grade_kernel", grade_kernel)
    space = {"BM": [128], "BN": [128], "BK": [8], "TM": [8], "TN": [6, 4, 8]}   # refused first, then two graded
    best, rows = structure.autotune("gemm", "the source", space)
    assert best == BASE and [r["config"] for r in rows] == structure.expand_space(space)
    assert rows[0] == {"config": BASE | {"TN": 6}, "status": Status.REFUSED,
                       "message": "TM, TN and BK must be multiples of 4 (float4 loads)"}
    assert [c[:4] for c in calls] == [("gemm", "autotuned", "the source", 0.5)] * 2
    assert [c[4] for c in calls] == [structure.tune_launch(BASE | {"TN": 4}), structure.tune_launch(BASE)]
    assert capsys.readouterr().out.splitlines() == [f"{BASE | {'TN': 4}}: timeout",
                                                    f"{BASE}: ok, 2000 GFLOP/s, 0.500 of cuBLAS"]
    monkeypatch.setattr(grade, "grade_kernel", lambda *a, **k: graded(Status.INCORRECT, None))
    with pytest.raises(RuntimeError) as raised:
        structure.autotune("gemm", "src", space)
    assert str(raised.value) == "no configuration of the space was correct"


def test_a_space_that_is_not_the_five_keys_is_the_searchs_only_problem_with_the_assignments_rules():
    assert structure.search_problems("gemm", "src", {"BM": [64]}, BASE) == (
        ["the search space maps each of BM, BN, BK, TM, TN to a list of values"], [])


def test_a_launch_is_made_of_ints():
    launch = structure.tune_launch({"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8})
    assert [type(v) for v in (*launch["block"], *launch["tile"], launch["params"]["BK"])] == [int] * 5


def test_a_value_of_1_is_a_positive_int_and_fails_on_the_next_rule():
    assert structure.config_problem(BASE | {"TM": 1}, RULES) == "TM, TN and BK must be multiples of 4 (float4 loads)"


# --- structure.toml read and checked ----------------------------------------------------------------------

SPEC = """[assignment]
name = "t"
engine = "cuda"
check_shapes = [[128, 128, 32]]
perf_shape = [256, 256, 64]
block = [16, 16]
tile = [128, 128]
points_correct = 1
points_perf = 2
floor = 0.1
target = 0.5

[[kernel]]
id = "fixed"
function = "fixed"
kind = "sgemm"
reference = "k.cu"

[[kernel]]
id = "tuned"
function = "tuned"
kind = "sgemm"
reference = "k.cu"
student_geometry = true
"""
CHECK = '[[check]]\nid = "c"\nkernel = "fixed"\nrequire = ["no_local"]\npoints = 1\n'
AUTOTUNE = ('[autotune]\nkernel = "tuned"\ncheck_id = "s"\npoints = 1\nmin_configs = 1\nmax_configs = 2\n'
            'max_tile = 128\nmax_bk = 32\nmax_threads = 1024\nmin_threads = 32\nmax_shared_bytes = 49152\n')


def structure_of(tmp_path, text: str) -> structure.Structure:
    (tmp_path / "k.cu").write_text("")
    (tmp_path / "spec.toml").write_text(SPEC)
    (tmp_path / "structure.toml").write_text(text)
    return structure.load_structure(tmp_path / "spec.toml")


def test_a_missing_structure_file_is_named_as_one(tmp_path):
    (tmp_path / "k.cu").write_text("")
    (tmp_path / "spec.toml").write_text(SPEC)
    with pytest.raises(SpecError) as raised:
        structure.load_structure(tmp_path / "spec.toml")
    assert str(raised.value) == f"no structure file at {tmp_path / 'structure.toml'}"


def test_a_structure_knows_its_file(tmp_path):
    assert structure_of(tmp_path, CHECK).path == tmp_path / "structure.toml"


def test_inspect_disassembles_unless_told_not_to(monkeypatch):
    calls = []
    monkeypatch.setattr(structure, "inspect_launches",
                        lambda assignment, kernel_id, source, launches, **options: calls.append((launches, options))
                        or [(["f"], {"x": 1})])
    assert structure.inspect("gemm", "vectorized", "src") == (["f"], {"x": 1})
    assert calls == [([{}], {"requirements": (), "disassemble": True})]


def test_a_structure_file_is_read(tmp_path):
    found = structure_of(tmp_path, CHECK + CHECK.replace('"c"', '"d"') + AUTOTUNE)
    assert found.checks == {"c": structure.Check("c", "fixed", ("no_local",), 1.0),
                            "d": structure.Check("d", "fixed", ("no_local",), 1.0)}
    assert found.autotune == structure.AutotuneRules("tuned", "s", 1, 1, 2, 128, 32, 1024, 32, 49152)
    assert structure_of(tmp_path, CHECK).autotune is None


@pytest.mark.parametrize("text, message", [
    (CHECK + "extra = 1\n", "[[check]] #1: unknown key(s) ['extra']"),
    (CHECK.replace('points = 1\n', ''), "[[check]] #1: missing 'points'"),
    (CHECK.replace('"fixed"', '"nobody"'), "nobody"),
    (CHECK.replace('"no_local"', '"fast"'), f"[[check]] #1: unknown requirement(s) ['fast']; known: "
                                            f"{sorted(sass.REQUIREMENTS)}"),
    (CHECK + CHECK, "[[check]] #2: duplicate id 'c'"),
    (AUTOTUNE + "speed = 1\n", "[autotune]: "),
    (AUTOTUNE.replace("points = 1\n", ""), "[autotune]: "),
    (AUTOTUNE.replace('"tuned"', '"fixed"'), "[autotune]: kernel 'fixed' needs student_geometry = true in the spec"),
])
def test_a_wrong_structure_file_is_refused_with_its_place(tmp_path, text, message):
    with pytest.raises(SpecError) as raised:
        structure_of(tmp_path, text)
    assert message in str(raised.value)
    if message.startswith("[["):
        assert str(raised.value).startswith(f"{tmp_path / 'structure.toml'} [[check]] #")
