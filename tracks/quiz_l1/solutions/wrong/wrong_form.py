# Answers of the wrong form, each scored 0 with the form it must have: an option that does not exist, a number
# written as a string, a line past the code's end.
# expect: add_regime_score=0 add_intensity_score=0 timing_score=0
# %% add_regime
add_regime = "d"
# %% add_intensity
add_intensity = "0.083"
# %% timing
timing = 7
