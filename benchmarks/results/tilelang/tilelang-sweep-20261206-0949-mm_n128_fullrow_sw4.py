@tilelang.jit
def matmul_fp16(block_M=128, block_N=128, block_K=64, num_stages=4, threads=256):
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def kernel(out: T.Tensor((M, N), "float16"), a: T.Tensor((M, K), "float16"), b: T.Tensor((K, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            T.use_swizzle(panel_size=10)
            a_tile = T.alloc_shared((block_M, block_K), "float16")
            b_tile = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(a[by * block_M, k * block_K], a_tile)
                T.copy(b[k * block_K, bx * block_N], b_tile)
                T.gemm(a_tile, b_tile, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, out[by * block_M, bx * block_N])

    return kernel
