# The cell raises before defining its kernel: the hidden tests find no kernel and score 0.
# expect: axis_sum_correct=0 axis_sum_limits=0
# %% axis_sum
raise RuntimeError("half-finished cell")
