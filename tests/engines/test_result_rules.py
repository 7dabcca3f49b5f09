"""`graders.result.GradeResult` at its edges: a failure line without a message, a details key named like a field."""
from graders.result import GradeResult, Status


def test_failure_line_without_a_message_is_the_head_and_the_inputs():
    assert GradeResult("k", Status.TIMEOUT, seed=5).failure_line() == "timeout (hidden, seed 5)"
    assert GradeResult("k", Status.INCORRECT, case="case 2 of 3", hidden=False).failure_line() == "case 2 of 3 (public)"
    assert GradeResult("k", Status.COMPILE_ERROR, seed=5).failure_line() == "compile_error"


def test_a_details_key_named_details_goes_back_into_details():
    result = GradeResult.from_dict({"test": "k", "status": "ok", "details": 3, "seconds": 1.5})
    assert result == GradeResult("k", Status.OK, details={"details": 3, "seconds": 1.5})
