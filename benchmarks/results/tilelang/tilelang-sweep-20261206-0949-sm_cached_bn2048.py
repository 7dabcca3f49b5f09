@tilelang.jit
def softmax(block_N=2048, threads=256, cached=8192):
    rows, cols = T.dynamic("rows"), T.dynamic("cols")

    @T.prim_func
    def kernel(out: T.Tensor((rows, cols), "float32"), x: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows, threads=threads) as row:
            tile = T.alloc_fragment((1, block_N), "float32")
            seen_max = T.alloc_fragment((1, block_N), "float32")
            new_max = T.alloc_fragment((1, block_N), "float32")
            seen_sum = T.alloc_fragment((1, block_N), "float32")
            row_max = T.alloc_fragment((1,), "float32")
            row_sum = T.alloc_fragment((1,), "float32")
            cache = T.alloc_shared((1, cached), "float32")
            T.fill(seen_max, -T.infinity("float32"))
            T.fill(seen_sum, 0.0)
            for t in T.serial(T.ceildiv(cols, block_N)):
                for i, j in T.Parallel(1, block_N):
                    tile[i, j] = T.if_then_else(t * block_N + j < cols, x[row, t * block_N + j], -T.infinity("float32"))
                for i, j in T.Parallel(1, block_N):
                    if t * block_N + j < cached:
                        cache[i, t * block_N + j] = tile[i, j]
                for i, j in T.Parallel(1, block_N):
                    new_max[i, j] = T.max(seen_max[i, j], tile[i, j])
                    seen_sum[i, j] = T.if_then_else(
                        new_max[i, j] == -T.infinity("float32"), 0.0,
                        seen_sum[i, j] * T.exp2((seen_max[i, j] - new_max[i, j]) * 1.4426950408889634)
                        + T.exp2((tile[i, j] - new_max[i, j]) * 1.4426950408889634))
                    seen_max[i, j] = new_max[i, j]
            T.reduce_max(seen_max, row_max, dim=1)
            for i, j in T.Parallel(1, block_N):
                seen_sum[i, j] = T.if_then_else(seen_max[i, j] == -T.infinity("float32"), 0.0,
                                                seen_sum[i, j] * T.exp2((seen_max[i, j] - row_max[i]) * 1.4426950408889634))
            T.reduce_sum(seen_sum, row_sum, dim=1)
            for t in T.serial(T.ceildiv(cols, block_N)):
                for i, j in T.Parallel(1, block_N):
                    if t * block_N + j < cols:
                        out[row, t * block_N + j] = T.exp2((T.if_then_else(t * block_N + j < cached, cache[i, t * block_N + j], x[row, t * block_N + j]) - row_max[i]) * 1.4426950408889634) / row_sum[i]

    return kernel
