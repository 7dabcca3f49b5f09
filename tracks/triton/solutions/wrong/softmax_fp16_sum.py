# expect: softmax_score=0
# status: incorrect
# The exponentials summed in fp16: an 11-bit significand, so a sum of thousands of terms is off by far more
# than fp32 softmax's tolerance, and every probability with it.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, rows, cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    inside = columns < cols
    x = tl.load(x_ptr + row * cols + columns, mask=inside, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(e.to(tl.float16), axis=0).to(tl.float32)
    tl.store(out_ptr + row * cols + columns, e / total, mask=inside)


softmax_launch = {"num_warps": 8}
