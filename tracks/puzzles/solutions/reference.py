# Reference solutions of the GPU Puzzles: one notebook cell per `# %% <grade_id>` marker.
# These cells, with their nbgrader solution markers, are the solution cells of
# assignments/puzzles/puzzles.ipynb (built by `workshop build`); the student's stub is what
# nbgrader leaves when it strips the lines between the markers. Geometry constants sit outside the markers.

# %% setup
import numba
from numba import cuda

from graders.numba_engine.grade import check

# %% map
@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    out[i] = a[i] + 10
    ### END SOLUTION

# %% zip
@cuda.jit
def zip_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    out[i] = a[i] + b[i]
    ### END SOLUTION

# %% guard
@cuda.jit
def guard_kernel(out, a, size):
    i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    if i < size:
        out[i] = a[i] + 10
    ### END SOLUTION

# %% map2d
@cuda.jit
def map2d_kernel(out, a, size):
    i = cuda.threadIdx.x
    j = cuda.threadIdx.y
    ### BEGIN SOLUTION
    if i < size and j < size:
        out[i, j] = a[i, j] + 10
    ### END SOLUTION

# %% broadcast
@cuda.jit
def broadcast_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    j = cuda.threadIdx.y
    ### BEGIN SOLUTION
    if i < size and j < size:
        out[i, j] = a[i, 0] + b[0, j]
    ### END SOLUTION

# %% blocks
@cuda.jit
def blocks_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    ### BEGIN SOLUTION
    if i < size:
        out[i] = a[i] + 10
    ### END SOLUTION

# %% blocks2d
@cuda.jit
def blocks2d_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    ### BEGIN SOLUTION
    if i < size and j < size:
        out[i, j] = a[i, j] + 10
    ### END SOLUTION

# %% shared
TPB = 4


@cuda.jit
def shared_kernel(out, a, size):
    shared = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    if i < size:
        shared[local_i] = a[i]
    cuda.syncthreads()
    if i < size:
        out[i] = shared[local_i] + 10
    ### END SOLUTION

# %% pooling
TPB = 8


@cuda.jit
def pool_kernel(out, a, size):
    shared = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    if i < size:
        shared[local_i] = a[i]
    cuda.syncthreads()
    if i < size:
        total = shared[local_i]
        if local_i >= 1:
            total += shared[local_i - 1]
        if local_i >= 2:
            total += shared[local_i - 2]
        out[i] = total
    ### END SOLUTION

# %% dot
TPB = 8


@cuda.jit
def dot_kernel(out, a, b, size):
    shared = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    shared[local_i] = a[i] * b[i] if i < size else 0.0
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if local_i < step:
            shared[local_i] += shared[local_i + step]
        cuda.syncthreads()
        step //= 2
    if local_i == 0:
        out[0] = shared[0]
    ### END SOLUTION

# %% conv1d
MAX_CONV = 4
TPB = 8
TPB_MAX_CONV = TPB + MAX_CONV


@cuda.jit
def conv_kernel(out, a, b, a_size, b_size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    ### BEGIN SOLUTION
    shared_a = cuda.shared.array(TPB_MAX_CONV, numba.float32)
    shared_b = cuda.shared.array(MAX_CONV, numba.float32)
    shared_a[local_i] = a[i] if i < a_size else 0.0
    if local_i < b_size - 1:
        halo = i + TPB
        shared_a[local_i + TPB] = a[halo] if halo < a_size else 0.0
    if local_i < b_size:
        shared_b[local_i] = b[local_i]
    cuda.syncthreads()
    if i < a_size:
        total = 0.0
        for j in range(b_size):
            total += shared_a[local_i + j] * shared_b[j]
        out[i] = total
    ### END SOLUTION

# %% prefix_sum
TPB = 8


@cuda.jit
def sum_kernel(out, a, size):
    cache = cuda.shared.array(TPB, numba.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    local_i = cuda.threadIdx.x
    ### BEGIN SOLUTION
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
    ### END SOLUTION

# %% axis_sum
TPB = 8


@cuda.jit
def axis_sum_kernel(out, a, size):
    cache = cuda.shared.array(TPB, numba.float32)
    local_i = cuda.threadIdx.x
    batch = cuda.blockIdx.y
    ### BEGIN SOLUTION
    cache[local_i] = a[batch, local_i] if local_i < size else 0.0
    cuda.syncthreads()
    step = 1
    while step < TPB:
        if local_i % (2 * step) == 0:
            cache[local_i] += cache[local_i + step]
        cuda.syncthreads()
        step *= 2
    if local_i == 0:
        out[batch, 0] = cache[0]
    ### END SOLUTION

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
    ### BEGIN SOLUTION
    total = 0.0
    for start in range(0, size, TPB):
        a_col = start + local_j
        b_row = start + local_i
        a_shared[local_i, local_j] = a[i, a_col] if i < size and a_col < size else 0.0
        b_shared[local_i, local_j] = b[b_row, j] if b_row < size and j < size else 0.0
        cuda.syncthreads()
        for k in range(TPB):
            total += a_shared[local_i, k] * b_shared[k, local_j]
        cuda.syncthreads()
    if i < size and j < size:
        out[i, j] = total
    ### END SOLUTION
