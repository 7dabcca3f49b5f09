# Program r holds row r in registers, padded to BLOCK_SIZE (a power of two at least cols): it reads the row
# once, takes its mean, subtracts it (the padding lanes set to 0 so they add nothing), takes the variance of
# what is left, and writes (x - mean) / sqrt(variance + eps) * weight + bias, all in fp32, once.
@triton.jit
def layer_norm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, rows, cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns, mask=inside, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    centred = tl.where(inside, x - mean, 0.0)
    variance = tl.sum(centred * centred, axis=0) / cols
    w = tl.load(w_ptr + columns, mask=inside)
    b = tl.load(b_ptr + columns, mask=inside)
    y = centred * tl.rsqrt(variance + eps) * w + b
    tl.store(out_ptr + row * cols + columns, y, mask=inside)


layernorm_launch = {"num_warps": 8}
