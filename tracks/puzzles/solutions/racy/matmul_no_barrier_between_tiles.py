# No barrier after a tile's products: a fast thread loads the next tile while slower ones still read this one
# (a write-after-read race in shared memory). On a GPU the warps of a 3 x 3 block often run in step, so the
# result comes out right by chance; compute-sanitizer's racecheck reports the hazard, and the simulator, whose
# threads run one at a time between barriers, gets it wrong.
# expect: matmul_correct=0 matmul_limits=0
# %% matmul
TPB = 3


@cuda.jit
def matmul_kernel(out, a, b, size):
    a_shared = cuda.shared.array((TPB, TPB), numba.float32)
    b_shared = cuda.shared.array((TPB, TPB), numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    local_i = cuda.threadIdx.x
    local_j = cuda.threadIdx.y
    total = 0.0
    for start in range(0, size, TPB):
        a_col = start + local_j
        b_row = start + local_i
        a_shared[local_i, local_j] = a[i, a_col] if i < size and a_col < size else 0.0
        b_shared[local_i, local_j] = b[b_row, j] if b_row < size and j < size else 0.0
        cuda.syncthreads()
        for k in range(TPB):
            total += a_shared[local_i, k] * b_shared[k, local_j]
    if i < size and j < size:
        out[i, j] = total
