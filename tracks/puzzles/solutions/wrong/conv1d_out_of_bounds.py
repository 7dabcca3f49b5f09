# Out-of-bounds read: walks past the end of `a` with no check.
# expect: conv1d_correct=0 conv1d_limits=0
# %% conv1d
@cuda.jit
def conv_kernel(out, a, b, a_size, b_size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < a_size:
        total = 0.0
        for j in range(b_size):
            total += a[i + j] * b[j]
        out[i] = total
