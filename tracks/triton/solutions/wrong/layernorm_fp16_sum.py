# expect: layernorm_score=0
# status: incorrect
# The row's sums in fp16: x rounded to an 11-bit significand before the mean is taken (values up to a hundred
# lose a twentieth and more), so the mean, the variance and every output are off by far more than fp32 layer
# norm's tolerance.
@triton.jit
def layer_norm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns, mask=inside, other=0.0)
    mean = tl.sum(x.to(tl.float16), axis=0).to(tl.float32) / cols
    centred = tl.where(inside, x - mean, 0.0)
    variance = tl.sum(centred * centred, axis=0) / cols
    w = tl.load(w_ptr + columns, mask=inside)
    b = tl.load(b_ptr + columns, mask=inside)
    y = centred * tl.rsqrt(variance + eps) * w + b
    tl.store(out_ptr + row * cols + columns, y, mask=inside)


layernorm_launch = {"num_warps": 8}
