# expect: softmax_score=0
# status: incorrect
# The row's load without its mask (the store keeps it): the padding lanes read the next row's logits (or, past
# the last row, NaN) instead of -inf, and the max and the sum take them in wherever cols is not a power of two.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, rows, cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * cols + columns, e / tl.sum(e, axis=0), mask=inside)


softmax_launch = {"num_warps": 8}
