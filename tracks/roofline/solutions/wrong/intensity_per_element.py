# Every intensity in FLOP per element (of the largest input; a matmul's per element of its output),
# not per byte: no intensity points; regimes and times right.
# expect: add_small_score=3 add_huge_score=3 sum_small_score=3 sum_huge_score=3 matvec_score=3 matmul_outer_score=3 matmul_fp32_score=3 matmul_bf16_score=3 softmax_score=3 layer_norm_score=3 chain_score=3 transpose_sum_score=3
# %% add_small
add_small = {"regime": "overhead", "intensity": 1.0, "time_us": 18.0}
# %% add_huge
add_huge = {"regime": "memory", "intensity": 1.0, "time_us": 335.5}
# %% sum_small
sum_small = {"regime": "overhead", "intensity": 1.0, "time_us": 18.0}
# %% sum_huge
sum_huge = {"regime": "memory", "intensity": 1.0, "time_us": 223.7}
# %% matvec
matvec = {"regime": "memory", "intensity": 2.0, "time_us": 223.7}
# %% matmul_outer
matmul_outer = {"regime": "memory", "intensity": 128.0, "time_us": 112.7}
# %% matmul_fp32
matmul_fp32 = {"regime": "compute", "intensity": 8192.0, "time_us": 2051.0}
# %% matmul_bf16
matmul_bf16 = {"regime": "compute", "intensity": 8192.0, "time_us": 139.0}
# %% softmax
softmax = {"regime": "memory", "intensity": 5.0, "time_us": 111.8}
# %% layer_norm
layer_norm = {"regime": "memory", "intensity": 8.0, "time_us": 111.9}
# %% chain
chain = {"regime": "overhead", "intensity": 20.0, "time_us": 151.0}
# %% transpose_sum
transpose_sum = {"regime": "memory", "intensity": 1.0, "time_us": 559.2}
