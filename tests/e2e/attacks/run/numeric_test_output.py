# Make the notebook's own run of every test cell end in a number: the hidden-test functions are patched in the
# notebook's kernel to return the cell's full points, so each test cell evaluates to 2.0 or 1.0. nbgrader
# scores a test cell by its first number or error, so were the trusted verdict appended after the notebook's
# own outputs instead of replacing them, the wrong Map and Zip kernels would score.
# expect: map_correct=0 map_limits=0 zip_correct=0 zip_limits=0

# %% map
import graders.numba_engine.grade as grading

grading.grade_correctness = grade_correctness = lambda *args: 2.0
grading.grade_limits = grade_limits = lambda *args: 1.0
grading.assert_correct = assert_correct = lambda *args: None
grading.assert_within_limits = assert_within_limits = lambda *args: None


@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    out[i] = a[i]

# %% zip
@cuda.jit
def zip_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    out[i] = a[i] - b[i]
