# The usual slips: blocks rounded down (the last partial block lost), a race said to be at the barrier's line, the
# out-of-bounds access said to be the write (the read comes first), and warps counted per row.
# expect: blocks_score=0 race_score=0 out_of_bounds_score=0 warps_score=0
# %% blocks
blocks = 0
# %% race
race = 5
# %% out_of_bounds
out_of_bounds = 4
# %% warps
warps = 0.5
