# Program r holds row r in registers, padded to BLOCK_SIZE (a power of two at least cols) with -inf, which
# exp turns into 0: it reads the row once, subtracts its max (so exp never overflows), sums the exponentials
# and writes each one divided by the sum, all in fp32, once.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, rows, cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns, mask=inside, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * cols + columns, e / tl.sum(e, axis=0), mask=inside)


softmax_launch = {"num_warps": 8}
