# Hangs: an endless loop in the kernel. The child process is stopped at its time limit.
# expect: blocks_correct=0 blocks_limits=0
# %% blocks
@cuda.jit
def blocks_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i >= 0:
        out[0] = 0.0
