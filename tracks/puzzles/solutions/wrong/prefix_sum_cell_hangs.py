# The cell itself hangs after defining a correct kernel: nbgrader interrupts it at the cell timeout,
# and the hidden tests after it still grade the kernel (full marks).
# expect: prefix_sum_correct=2 prefix_sum_limits=1
# %% prefix_sum
TPB = 8


@cuda.jit
def sum_kernel(out, a, size):
    cache = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    cache[local_i] = a[i] if i < size else 0.0
    cuda.syncthreads()
    step = 1
    while step < TPB:
        if local_i % (2 * step) == 0:
            cache[local_i] += cache[local_i + step]
        cuda.syncthreads()
        step *= 2
    if local_i == 0:
        out[cuda.blockIdx.x] = cache[0]


while True:
    pass
