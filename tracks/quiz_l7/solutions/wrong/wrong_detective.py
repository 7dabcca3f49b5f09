# The tools swapped (a race sent to memcheck, an uninitialised read to racecheck), the hang taken for the dead body's
# crash, the barrier blamed instead of the early return, and a throughput above 100% of the peak.
# expect: racecheck_score=0 initcheck_score=0 missing_person_score=0 skipped_barrier_score=0 dram_percent_score=0
# %% racecheck
racecheck = "a"
# %% initcheck
initcheck = "b"
# %% missing_person
missing_person = "a"
# %% skipped_barrier
skipped_barrier = 6
# %% dram_percent
dram_percent = 150
