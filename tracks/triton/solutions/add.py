# Program p adds the elements p * BLOCK_SIZE to p * BLOCK_SIZE + BLOCK_SIZE - 1: one load of a block of each
# vector, one add, one store. The last program's block runs past n: its loads and its store are masked, so the
# lanes past the end neither read nor write.
@triton.jit
def add_kernel(out_ptr, a_ptr, b_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n
    a = tl.load(a_ptr + offsets, mask=inside)
    b = tl.load(b_ptr + offsets, mask=inside)
    tl.store(out_ptr + offsets, a + b, mask=inside)


add_launch = {"BLOCK_SIZE": 1024, "num_warps": 4}
