# An MMA's FLOPs answered as its one instruction, a swizzled chunk put in bank 3 (a 16-byte chunk of a
# 128-byte row starts in a bank that is a multiple of 4), TF32 taken for a storage format, and the leading
# dimension blamed on A's load (the store's is wrong).
# expect: mma_flops_score=0 swizzle_bank_score=0 tf32_score=0 leading_dimension_score=0
# %% mma_flops
mma_flops = 1
# %% swizzle_bank
swizzle_bank = 3
# %% tf32
tf32 = "b"
# %% leading_dimension
leading_dimension = 6
