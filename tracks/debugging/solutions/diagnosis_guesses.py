# Answers of the kind a guess gives (outside solutions/wrong/, whose files are CUDA kernels handed in for a fix):
# memcheck for the race, the line where the NaN is written rather than made, "out of bounds" for the misaligned
# load; the deep-read read the wrong way round (the decode kernel called compute-bound, occupancy as a fraction, not
# a percent, DRAM throughput as a percent, not a fraction); the rest right.
# expect: reduce_tool_score=0 softmax_line_score=0 copy_class_score=0 decode_limit_score=0 gemm_occupancy_score=0 decode_dram_score=0
# %% reduce_tool
reduce_tool = "a"
# %% softmax_line
softmax_line = 19
# %% copy_class
copy_class = "e"
# %% decode_limit
decode_limit = "b"
# %% gemm_occupancy
gemm_occupancy = 0.125
# %% decode_dram
decode_dram = 75.73
