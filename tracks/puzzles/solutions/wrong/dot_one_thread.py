# Correct but over the access limits: one thread reads everything and no shared memory is used.
# expect: dot_correct=2 dot_limits=0
# %% dot
TPB = 8


@cuda.jit
def dot_kernel(out, a, b, size):
    if cuda.threadIdx.x == 0:
        total = 0.0
        for k in range(size):
            total += a[k] * b[k]
        out[0] = total
