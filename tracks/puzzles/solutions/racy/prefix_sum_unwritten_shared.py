# A partial block reads shared memory that no thread wrote (the load has no `else 0.0`). On a GPU that memory
# often holds zeros, so the sum comes out right by chance; the simulator fills it with NaN. Graded on a GPU
# worker, the simulator's verdict still counts: it loses its correctness points there too.
# expect: prefix_sum_correct=0 prefix_sum_limits=0
# %% prefix_sum
TPB = 8


@cuda.jit
def sum_kernel(out, a, size):
    cache = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    if i < size:
        cache[local_i] = a[i]
    cuda.syncthreads()
    step = 1
    while step < TPB:
        if local_i % (2 * step) == 0:
            cache[local_i] += cache[local_i + step]
        cuda.syncthreads()
        step *= 2
    if local_i == 0:
        out[cuda.blockIdx.x] = cache[0]
