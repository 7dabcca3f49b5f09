"""Lecture 8's quiz, attention: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 8: attention"
INTRO = """
From the chapters on softmax and its online form, FlashAttention and decoding: attention is `O = softmax(Q K^T /
sqrt(d)) V` per head, Q, K, V and O of N x d for a sequence of N tokens. Tensors are bf16 (2 bytes) unless a
question says otherwise; fp8 is 1 byte. 1 MB = 10^6 bytes; 1 KiB = 2^10, 1 GiB = 2^30 bytes. A multiply-add is 2
FLOPs.
"""
BYTES = {"bf16": 2, "fp8": 1}
# (layers, KV heads, head dimension) of the models asked about
MODELS = [(32, 8, 128), (32, 32, 128), (80, 8, 128), (28, 4, 128), (40, 40, 128)]

QUESTIONS = [
    Numeric("online_sum", "The online softmax has read part of a row of scores: its running maximum is *m* and its "
            "running sum of exp(score - *m*) is *l*. The next block brings the two scores *x₁* and *x₂*. The "
            "running sum after them (relative to the new running maximum).",
            lambda r: {"m": r.randrange(0, 40) / 10, "l": r.randrange(10, 80) / 10,
                       "x1": r.randrange(-20, 60) / 10, "x2": r.randrange(-20, 60) / 10},
            given="m = {m:g}, l = {l:g}, x₁ = {x1:g}, x₂ = {x2:g}", unit="", rel_tol=0.01),
    Choice("rescale", "In FlashAttention's inner loop, a new block of K raises a row's running maximum from *m* to "
           "*m'*. By what must the row's accumulated output (the running sum of weights times V) be multiplied "
           "before the new block's contribution is added?",
           {"a": "exp(*m'* - *m*)", "b": "exp(*m* - *m'*)", "c": "*m* / *m'*",
            "d": "nothing: only the running sum is rescaled"}),
    Numeric("score_matrix", "Naive attention writes the N x N score matrix `S = Q K^T` of every head to HBM. Its "
            "size for a batch of B sequences of H heads, in GiB.",
            lambda r: {"b": r.choice([1, 4, 8, 16]), "h": r.choice([16, 32, 64]),
                       "n": r.choice([2048, 4096, 8192, 16384])},
            given="B = {b}, H = {h}, N = {n}", unit="GiB", rel_tol=0.01),
    Numeric("flash_hbm", "FlashAttention for one head: each block of Br rows of Q is read once, streams every "
            "tile of K and of V from HBM, and writes its rows of O once. Counting every tile load as HBM traffic "
            "(no cache), the bytes it moves for your N, d and Br, in MB.",
            lambda r: {"n": r.choice([4096, 8192, 16384, 32768]), "d": r.choice([64, 128]),
                       "br": r.choice([64, 128])},
            given="N = {n}, d = {d}, Br = {br}", unit="MB", rel_tol=0.01),
    Numeric("tile_smem", "A FlashAttention block keeps a Br x d tile of Q and one Bc x d tile each of K and V in "
            "shared memory. The shared memory they take, in KiB.",
            lambda r: {"br": r.choice([64, 128]), "bc": r.choice([32, 64, 128]), "d": r.choice([64, 128, 256])},
            given="Br = {br}, Bc = {bc}, d = {d}", unit="KiB", rel_tol=0.01),
    Choice("fa2_split", "How does FlashAttention-2 split a block's work among its warps?",
           {"a": "each warp takes its own rows of Q and reads all of the block's K and V, so the warps never "
                 "exchange partial results through shared memory",
            "b": "each warp takes its own slice of K and V, and the warps add up their partial outputs in shared "
                 "memory",
            "c": "each warp computes a different head",
            "d": "one warp computes S, the next the softmax, a third P V, as a pipeline"}),
    Numeric("kv_cache", "The KV cache of a model with the layers, KV heads and head dimension the cell below gives, "
            "for a batch of sequences of the given length, stored in the given type. Its size in GiB.",
            lambda r: dict(zip(("layers", "heads", "d"), r.choice(MODELS)),
                           tokens=r.choice([4096, 8192, 32768, 131072]), batch=r.choice([1, 8, 32]),
                           dtype=r.choice(list(BYTES))),
            given="{layers} layers, {heads} KV heads of dimension {d}; a batch of {batch}, {tokens} tokens each; "
                  "{dtype}",
            unit="GiB", rel_tol=0.01),
    Numeric("decode_intensity", "Decoding one token of one sequence: for one KV head, G query heads (grouped-query "
            "attention) each compute their scores against all L cached keys and their output from all L cached "
            "values. Counting only the multiply-adds of `q K^T` and `p V` and only the bytes of K and V read, its "
            "arithmetic intensity (FLOP per byte).",
            lambda r: {"g": r.choice([1, 2, 4, 8]), "dtype": r.choice(list(BYTES)),
                       "l": r.choice([1024, 8192, 65536])},
            given="G = {g}, K and V in {dtype}, L = {l}", unit="FLOP/byte", rel_tol=0.01),
    Line("missing_rescale", "One row of attention with the online softmax, K and V read block by block. Which line "
         "is wrong?",
         """\
m, l, o = -inf, 0.0, zeros(d)
for K_j, V_j in blocks(K, V):
    s = q @ K_j.T / sqrt(d)
    m_new = max(m, s.max())
    p = exp(s - m_new)
    l = l * exp(m - m_new) + p.sum()
    o = o + p @ V_j
    m = m_new
o = o / l"""),
]
