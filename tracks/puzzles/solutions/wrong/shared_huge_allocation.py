# Huge allocation: asks for 16 GiB of shared memory. Fails cleanly (memory limit), 0 for this puzzle only.
# expect: shared_correct=0 shared_limits=0
# %% shared
TPB = 4


@cuda.jit
def shared_kernel(out, a, size):
    shared = cuda.shared.array(1 << 32, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    if i < size:
        shared[local_i] = a[i]
    cuda.syncthreads()
    if i < size:
        out[i] = shared[local_i] + 10
