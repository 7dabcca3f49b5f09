# Out of bounds: no guard, so threads past the end write beyond `out`.
# expect: guard_correct=0 guard_limits=0
# %% guard
@cuda.jit
def guard_kernel(out, a, size):
    i = cuda.threadIdx.x
    out[i] = a[i] + 10
