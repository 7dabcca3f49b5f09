# The FLOPs counted once per multiply-add, the naive kernel's traffic counted once per element of C (as if a thread's
# row and column were cached), the naive kernel's read of A called coalesced, and the barrier's line called the race.
# expect: gemm_gflop_score=0 naive_gb_score=0 naive_a_access_score=0 race_score=0
# %% gemm_gflop
gemm_gflop = 1.0
# %% naive_gb
naive_gb = 0.0
# %% naive_a_access
naive_a_access = "a"
# %% race
race = 7
