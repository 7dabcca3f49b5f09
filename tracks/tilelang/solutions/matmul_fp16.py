# Block (bx, by) computes one block_M x block_N tile of out: it walks K a block_K slice at a time, T.copy bringing
# a's and b's tiles into shared memory (TileLang picks TMA on Hopper and zero-fills what lies past M, N or K),
# T.gemm adding their product into an fp32 accumulator in registers on the tensor cores, the loop T.Pipelined over
# num_stages buffers so that the next tiles load while this one multiplies. The accumulator is then rounded to
# fp16 into shared memory (stmatrix) and stored by TMA, which writes only the part inside out: copied straight
# out, it would be one 2-byte store per element, each checked against M and N (N is not known to keep rows
# aligned), about a fifth of the kernel's time at 4096^3. A 128 x 256 tile (each of the two consumer
# warpgroups TileLang makes of 256 threads multiplies with 64 x 128 wgmma) reuses each loaded byte twice as often as
# 128 x 128, and T.use_swizzle launches the blocks in panels of 10 along M so that neighbours share b's tiles in L2.
@tilelang.jit
def matmul_fp16(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256):
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def kernel(out: T.Tensor((M, N), "float16"), a: T.Tensor((M, K), "float16"), b: T.Tensor((K, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            T.use_swizzle(panel_size=10)
            a_tile = T.alloc_shared((block_M, block_K), "float16")
            b_tile = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            out_tile = T.alloc_shared((block_M, block_N), "float16")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(a[by * block_M, k * block_K], a_tile)
                T.copy(b[k * block_K, bx * block_N], b_tile)
                T.gemm(a_tile, b_tile, acc)
            T.copy(acc, out_tile)
            T.copy(out_tile, out[by * block_M, bx * block_N])

    return kernel
