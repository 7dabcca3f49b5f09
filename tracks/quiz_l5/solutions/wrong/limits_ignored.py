# Occupancy over 100% (threads per SM counted against the warps' 64), no block said to fit in shared memory,
# the transposed tile of A credited with coalescing, and warptiling mistaken for tensor cores.
# expect: occupancy_score=0 smem_blocks_score=0 transposed_a_score=0 warptiling_score=0
# %% occupancy
occupancy = 101
# %% smem_blocks
smem_blocks = 0
# %% transposed_a
transposed_a = "a"
# %% warptiling
warptiling = "a"
