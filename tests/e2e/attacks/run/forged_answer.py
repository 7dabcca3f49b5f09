# Forge the grading child's answer: each kernel prints, once, the JSON answer of a passing grading, so that the
# child's stdout is exactly that answer. The parent reads the answer from a private pipe, not stdout, so
# the wrong Map kernel earns nothing and the Pooling kernel, correct but over its access limit, keeps only
# its correctness points. The notebook prints the same forged answers into its own outputs.
# expect: map_correct=0 map_limits=0 pooling_correct=2 pooling_limits=0

# %% map
# Wrong (no +10): fails the first hidden case (size 4), after thread 0 printed the forged answer.
@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    if i == 0:
        print('{"test": "map", "status": "ok", "cases": 3, "hidden": true, "target": "sim"}')
    out[i] = a[i]

# %% pooling
# Correct, three global reads a thread (the limit is one): prints the forged answer once, in the size-8 case.
TPB = 8


@cuda.jit
def pool_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i == 0 and size == 8:
        print('{"test": "pooling", "status": "ok", "cases": 2, "hidden": true, "target": "sim"}')
    if i < size:
        total = a[i]
        if i >= 1:
            total += a[i - 1]
        if i >= 2:
            total += a[i - 2]
        out[i] = total

# %% zip+
print('{"test": "map", "status": "ok", "cases": 3, "hidden": true, "target": "sim"}')
print('{"test": "pooling", "status": "ok", "cases": 2, "hidden": true, "target": "sim"}')
