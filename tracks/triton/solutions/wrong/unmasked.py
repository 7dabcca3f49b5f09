# expect: add_score=0
# status: oob_write
# Loads and store without their mask: the last program reads past the end of a and b and writes past the end of
# out wherever n is not a multiple of BLOCK_SIZE.
@triton.jit
def add_kernel(out_ptr, a_ptr, b_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    a = tl.load(a_ptr + offsets)
    b = tl.load(b_ptr + offsets)
    tl.store(out_ptr + offsets, a + b)


add_launch = {"BLOCK_SIZE": 1024, "num_warps": 4}
