# Correct but over the access limit: reads its three values from global memory, not shared memory.
# expect: pooling_correct=2 pooling_limits=0
# %% pooling
TPB = 8


@cuda.jit
def pool_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < size:
        total = a[i]
        if i >= 1:
            total += a[i - 1]
        if i >= 2:
            total += a[i - 2]
        out[i] = total
