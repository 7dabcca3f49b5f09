"""benchmarks/model_call_split.py on the CPU (its GPU use: `bash benchmarks/gpu_trusted.sh call-split`): a call's
split is measured with the grader's own Judge, and no kernel is reported where no GPU ran one."""
import torch

from benchmarks.model_call_split import split
from graders.model_engine.child import Judge, problem_namespace, problem_text
from graders.model_engine.spec import load_model_spec


def test_a_calls_split_on_the_cpu_has_the_graders_time_and_the_hosts_part():
    spec = load_model_spec("kernelbench")
    problem = spec.problem("relu")
    namespace = problem_namespace(problem_text(spec.path.parent / "problem.py", "relu"), problem.cpu_sizes)
    judge = Judge(torch, problem, namespace, "cpu", seed=0)
    found = split(judge, judge.reference, calls=2)
    assert found["graded_ms"] > 0 and found["host_ms"] > 0
    assert found["kernels_us"] == {}
