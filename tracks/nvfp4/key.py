"""The NVFP4 track's answer key (`graders.quiz_engine`): the Blackwell part's reading questions (problem.py's
``BLACKWELL``), from the PTX ISA's tcgen05 chapter and the course's chapter on NVFP4."""

KEY = {
    # tcgen05.mma is issued by one thread of the CTA; D lives in TMEM (wgmma's lived in the warpgroup's registers)
    "tcgen05_issue": "c",
    # TMEM on sm_100: 128 lanes x 512 columns x 32 bits = 256 KB per SM
    "tmem_size": "b",
    # one 32-bit column per fp32 element of a row: 256 columns (a power of two, within the 512)
    "tmem_columns": "b",
    # tcgen05.alloc from a single warp, in columns (a power of two >= 32); tcgen05.dealloc before the kernel exits
    "tmem_alloc": "d",
    # tcgen05.ld: warp w % 4 of a warpgroup reaches TMEM lanes 32 (w % 4) to 32 (w % 4) + 31
    "tmem_epilogue": "a",
    # cta_group::2: one MMA over the peer CTAs of a cluster pair, each with half of A, D and B
    "cta_pair": "c",
    # the block scale factors are operands in TMEM, copied there from shared memory by tcgen05.cp
    "block_scaled": "b",
    # arithmetic intensity about 0.9 FLOP per byte of weights: far under any GPU's ridge point
    "gemv_tensor_cores": "d",
    # tcgen05 and TMEM are sm_100a / sm_101a / sm_103a; Hopper (sm_90) has wgmma, TMA and clusters
    "h200_runs": "a",
}
