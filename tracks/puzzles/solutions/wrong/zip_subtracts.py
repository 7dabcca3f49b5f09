# Wrong result: subtracts instead of adding.
# expect: zip_correct=0 zip_limits=0
# %% zip
@cuda.jit
def zip_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    out[i] = a[i] - b[i]
