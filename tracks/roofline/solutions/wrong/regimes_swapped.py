# Every regime swapped (memory-bound called compute-bound, compute-bound memory-bound, overhead-bound
# memory-bound); intensities and times the reference's: regime points lost, the rest kept.
# expect: add_small_score=3 add_huge_score=3 sum_small_score=3 sum_huge_score=3 matvec_score=3 matmul_outer_score=3 matmul_fp32_score=3 matmul_bf16_score=3 softmax_score=3 layer_norm_score=3 chain_score=3 transpose_sum_score=3
# %% add_small
add_small = {"regime": "memory", "intensity": 0.08333, "time_us": 18.0}
# %% add_huge
add_huge = {"regime": "compute", "intensity": 0.08333, "time_us": 335.5}
# %% sum_small
sum_small = {"regime": "memory", "intensity": 0.2499, "time_us": 18.0}
# %% sum_huge
sum_huge = {"regime": "compute", "intensity": 0.25, "time_us": 223.7}
# %% matvec
matvec = {"regime": "compute", "intensity": 0.4999, "time_us": 223.7}
# %% matmul_outer
matmul_outer = {"regime": "compute", "intensity": 63.5, "time_us": 112.7}
# %% matmul_fp32
matmul_fp32 = {"regime": "memory", "intensity": 682.7, "time_us": 2051.0}
# %% matmul_bf16
matmul_bf16 = {"regime": "memory", "intensity": 1365.0, "time_us": 139.0}
# %% softmax
softmax = {"regime": "compute", "intensity": 0.625, "time_us": 111.8}
# %% layer_norm
layer_norm = {"regime": "compute", "intensity": 1.0, "time_us": 111.9}
# %% chain
chain = {"regime": "memory", "intensity": 0.125, "time_us": 151.0}
# %% transpose_sum
transpose_sum = {"regime": "compute", "intensity": 0.08333, "time_us": 559.2}
