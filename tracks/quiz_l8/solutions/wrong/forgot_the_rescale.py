# The output rescaled by the inverse factor, the fixed line taken for the bug (the running sum's line, which does
# rescale), FlashAttention-1's split of K and V among warps given as FlashAttention-2's, and a KV cache of zero bytes.
# expect: rescale_score=0 missing_rescale_score=0 fa2_split_score=0 kv_cache_score=0
# %% rescale
rescale = "a"
# %% missing_rescale
missing_rescale = 6
# %% fa2_split
fa2_split = "b"
# %% kv_cache
kv_cache = 0
