# Correct but over the access limits: each thread reads a whole row and column from global memory.
# expect: matmul_correct=2 matmul_limits=0
# %% matmul
@cuda.jit
def matmul_kernel(out, a, b, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < size and j < size:
        total = 0.0
        for k in range(size):
            total += a[i, k] * b[k, j]
        out[i, j] = total
