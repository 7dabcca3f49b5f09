# Earn the access-limit points of kernels over their limits by moving the excess accesses into print(...)'s
# arguments: a walrus that reads, an atomic that reads and writes, a device function that reads and writes.
# Every access a kernel makes counts, in a print too (the simulator counts them, also on a GPU worker), so
# each kernel keeps only its correctness points.
# expect: pooling_correct=2 pooling_limits=0 dot_correct=2 dot_limits=0 conv1d_correct=2 conv1d_limits=0

# %% pooling
# Three global reads a thread (the limit is one): the two neighbours' are read inside print, by a walrus.
TPB = 8


@cuda.jit
def pool_kernel(out, a, size):
    shared = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    if i < size:
        shared[local_i] = a[i]
        total = shared[local_i]
        if i >= 1:
            print("pooling", i, (total := total + a[i - 1]))
        if i >= 2:
            print("pooling", i, (total := total + a[i - 2]))
        out[i] = total

# %% dot
# Every thread adds its product into out[0] with an atomic inside print: 1 + size global writes in the block
# (the limit is one), two writes by thread 0 (the limit is one a thread).
TPB = 8


@cuda.jit
def dot_kernel(out, a, b, size):
    shared = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    shared[local_i] = 0.0
    if local_i == 0:
        out[0] = 0.0
    cuda.syncthreads()
    if i < size:
        print("dot", i, cuda.atomic.add(out, 0, a[i] * b[i]))

# %% conv1d
# No shared-memory tiling: a device function called inside print reads up to b_size values of a and of b
# straight from global memory and writes the output (the limit is three reads a thread).
MAX_CONV = 4
TPB = 8
TPB_MAX_CONV = TPB + MAX_CONV


@cuda.jit(device=True)
def convolve_at(out, a, b, i, a_size, b_size):
    total = 0.0
    for j in range(b_size):
        if i + j < a_size:
            total += a[i + j] * b[j]
    out[i] = total
    return total


@cuda.jit
def conv_kernel(out, a, b, a_size, b_size):
    shared_a = cuda.shared.array(TPB_MAX_CONV, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    shared_a[local_i] = 0.0
    if i < a_size:
        print("conv1d", i, convolve_at(out, a, b, i, a_size, b_size))
