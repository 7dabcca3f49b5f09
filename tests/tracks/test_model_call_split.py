"""benchmarks/model_call_split.py on the CPU (its GPU use: `bash benchmarks/gpu_trusted.sh call-split`): a call's
split is measured with the grader's own Judge, and no kernel is reported where no GPU ran one."""
from benchmarks.model_call_split import judge_for, split
from graders.model_engine.spec import load_model_spec


def test_a_calls_split_on_the_cpu_has_the_graders_time_and_the_hosts_part():
    judge = judge_for(load_model_spec("kernelbench"), "relu", "cpu")
    assert judge.cuda is False and judge.problem.id == "relu"
    found = split(judge, judge.reference, calls=2)
    assert found["graded_ms"] > 0 and found["checked_ms"] > 0 and found["host_ms"] > 0
    assert found["kernels_us"] == {}
