# A correct Map kernel that prints about 1 GB from the grading child (five 64 MiB lines a launch, three hidden
# launches, in numba-cuda's simulator). The grader keeps the last 4 KiB of a child's stdout and drains the rest,
# so nbgrader's memory stays flat and the kernel earns its honest points.
# expect: map_correct=2 map_limits=1

# %% map
@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    if i == 0:
        for k in range(5):
            print("x" * 67108864)
    out[i] = a[i] + 10
