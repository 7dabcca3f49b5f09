# Program p computes one BLOCK_SIZE_M x BLOCK_SIZE_N tile of out: it walks K a BLOCK_SIZE_K slice at a time,
# loading a tile of a and one of b (masked past K, so the last slice adds zeros) and adding their product into
# an fp32 accumulator on the tensor cores (tl.dot), then rounds the tile to the output's dtype and stores it,
# masked at the matrix's edges. Rows and columns past M and N wrap around instead of being masked: their loads
# stay inside a and b and their results are never stored. Programs are numbered in groups of GROUP_SIZE_M tile
# rows, column by column, so the programs running together share tiles of a and b in L2.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=3),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_fp16_kernel(out_ptr, a_ptr, b_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                       BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = pid // per_group * GROUP_SIZE_M
    group_m = tl.minimum(tl.cdiv(M, BLOCK_SIZE_M) - first_m, GROUP_SIZE_M)
    tile_m = first_m + pid % per_group % group_m
    tile_n = pid % per_group // group_m
    rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + (rows % M)[:, None] * K + ks[None, :]
    b_tile = b_ptr + ks[:, None] * N + (cols % N)[None, :]
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_tile, mask=ks[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K
        b_tile += BLOCK_SIZE_K * N
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=inside)
