# Every regime swapped (memory-bound called compute-bound, overhead called memory), the ridge point upside down
# (bandwidth over peak) and the timing fixed on the wrong line; the rest right.
# expect: add_regime_score=0 tiny_ops_score=0 ridge_score=0 timing_score=0
# %% add_regime
add_regime = "a"
# %% tiny_ops
tiny_ops = "b"
# %% ridge
ridge = 0.01
# %% timing
timing = 4
