# The bytes left uncounted, the write called the coalesced access of a naive transpose, and shared memory put
# above registers.
# expect: transpose_bytes_score=0 coalescing_score=0 hierarchy_score=0
# %% transpose_bytes
transpose_bytes = 0
# %% coalescing
coalescing = "c"
# %% hierarchy
hierarchy = "b"
