# Tampering: a wrong Zip kernel, and a cell that replaces the grader's functions in the notebook process so
# that hidden tests run in the notebook would pass. The trusted grader reads the kernel from the file instead.
# expect: zip_correct=0 zip_limits=0
# %% zip
import graders.numba_engine.grade as _grading

_grading.grade_correctness = lambda *args: None
_grading.grade_limits = lambda *args: None


@cuda.jit
def zip_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    out[i] = a[i] * b[i]
