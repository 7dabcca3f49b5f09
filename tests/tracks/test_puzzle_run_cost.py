"""benchmarks/puzzle_run_cost.py on the CPU (its GPU use: `bash benchmarks/gpu_trusted.sh puzzle-cost`): each
puzzle's request holds its reference kernel as the trusted grader parses it from the cell, and a sandboxed child
answers one as the grader's does."""
from benchmarks.puzzle_run_cost import child_run, request_of
from graders.numba_engine import catalogue
from graders.numba_engine.numba_subset import validate_kernel_source


def test_every_puzzles_request_holds_its_parsed_reference_and_a_child_grades_one_ok():
    for puzzle in catalogue.PUZZLES:
        request = request_of(puzzle.id, "sim")
        validate_kernel_source(request["source"])   # raises outside the kernel subset
        assert f"def {puzzle.kernel_name}(" in request["source"] and request["mode"] == "hidden"
    child_run(request_of("map", "sim"))()   # raises unless the child answered ok
