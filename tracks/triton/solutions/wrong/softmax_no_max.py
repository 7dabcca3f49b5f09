# expect: softmax_score=0
# status: incorrect
# No max subtracted: exp of a logit above 88.7 overflows fp32 to inf, and inf / inf is NaN; a row whose logits
# are all hundreds below zero sums to 0, and 0 / 0 is NaN.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, rows, cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns, mask=inside, other=-float("inf"))
    e = tl.exp(x)
    tl.store(out_ptr + row * cols + columns, e / tl.sum(e, axis=0), mask=inside)


softmax_launch = {"num_warps": 8}
