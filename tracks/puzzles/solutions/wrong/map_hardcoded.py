# Cheats: writes the expected answer for the public inputs, whatever `a` holds. Passes the self-check,
# fails the hidden tests (fresh inputs). The limits part fails with it: limits count only for correct kernels.
# expect: map_correct=0 map_limits=0
# %% map
@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    if i == 0:
        out[i] = 5.0
    elif i == 1:
        out[i] = 13.0
    elif i == 2:
        out[i] = 2.0
    elif i == 3:
        out[i] = 5.0
