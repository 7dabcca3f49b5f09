"""benchmarks/grading_time.py's reading of an autograded notebook (its GPU use: `bash benchmarks/gpu_trusted.sh
timing`): each kernel's prepared work, the sanitizer's runs and the counter rule's ncu counts, in seconds."""
import nbformat

from benchmarks.grading_time import graded_results, preparations
from graders.autograde import RESULTS_KEY


class _Course:
    def __init__(self, results: list[dict]):
        cell = nbformat.v4.new_code_cell("score('attention', 'flash_causal', src)")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "flash_causal_score", "points": 3}
        cell.metadata[RESULTS_KEY] = {"results": results}
        self.notebook = nbformat.v4.new_notebook(cells=[cell])

    def autograded(self, student: str):
        return self.notebook


def test_each_kernels_sanitizer_runs_and_ncu_counts_are_read_with_their_seconds():
    prepared = {"test": "flash_causal", "sanitizer": {"prepared": True, "seconds": {"memcheck": 6.2, "racecheck": 7.5},
                                                       "batched": {"memcheck": 8}},
                "counter": {"yours": 10, "reference": 20, "seconds": {"yours": 9.1, "reference": 0.0}}}
    inline = {"test": "decode", "sanitizer": {"seconds": {"memcheck": 4.0}}}   # its test ran the tool itself
    assert preparations(graded_results(_Course([prepared, inline]), "s")) == {
        "flash_causal": {"memcheck batch of 8": 6.2, "racecheck": 7.5, "ncu": 9.1, "ncu reference": 0.0}}
