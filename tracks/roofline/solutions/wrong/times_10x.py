# Every time 10x off (every other operation 10x too slow, the rest 10x too fast); regimes and intensities
# right. The reference's times are within 2x of the measurement, so these are at least 5x off: no time points
# whatever the measurement is.
# expect: add_small_score=2 add_huge_score=2 sum_small_score=2 sum_huge_score=2 matvec_score=2 matmul_outer_score=2 matmul_fp32_score=2 matmul_bf16_score=2 softmax_score=2 layer_norm_score=2 chain_score=2 transpose_sum_score=2
# %% add_small
add_small = {"regime": "overhead", "intensity": 0.08333, "time_us": 180.0}
# %% add_huge
add_huge = {"regime": "memory", "intensity": 0.08333, "time_us": 33.55}
# %% sum_small
sum_small = {"regime": "overhead", "intensity": 0.2499, "time_us": 180.0}
# %% sum_huge
sum_huge = {"regime": "memory", "intensity": 0.25, "time_us": 22.37}
# %% matvec
matvec = {"regime": "memory", "intensity": 0.4999, "time_us": 2237.0}
# %% matmul_outer
matmul_outer = {"regime": "memory", "intensity": 63.5, "time_us": 11.27}
# %% matmul_fp32
matmul_fp32 = {"regime": "compute", "intensity": 682.7, "time_us": 20510.0}
# %% matmul_bf16
matmul_bf16 = {"regime": "compute", "intensity": 1365.0, "time_us": 13.9}
# %% softmax
softmax = {"regime": "memory", "intensity": 0.625, "time_us": 1118.0}
# %% layer_norm
layer_norm = {"regime": "memory", "intensity": 1.0, "time_us": 11.19}
# %% chain
chain = {"regime": "overhead", "intensity": 0.125, "time_us": 1510.0}
# %% transpose_sum
transpose_sum = {"regime": "memory", "intensity": 0.08333, "time_us": 55.92}
