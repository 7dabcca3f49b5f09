# expect: layernorm_score=0
# status: incorrect
# The variance taken as the mean of x^2, without the mean subtracted: it is the variance plus the squared mean,
# so every row whose mean is not near 0 comes out shrunk towards the bias.
@triton.jit
def layer_norm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns, mask=inside, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    variance = tl.sum(x * x, axis=0) / cols
    w = tl.load(w_ptr + columns, mask=inside)
    b = tl.load(b_ptr + columns, mask=inside)
    y = (x - mean) * tl.rsqrt(variance + eps) * w + b
    tl.store(out_ptr + row * cols + columns, y, mask=inside)


layernorm_launch = {"num_warps": 8}
