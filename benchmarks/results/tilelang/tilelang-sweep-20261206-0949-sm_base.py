@tilelang.jit
def softmax(block_N=1024, threads=128):
    rows, cols = T.dynamic("rows"), T.dynamic("cols")

    @T.prim_func
    def kernel(out: T.Tensor((rows, cols), "float32"), x: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows, threads=threads) as row:
            tile = T.alloc_fragment((1, block_N), "float32")
            tile_max = T.alloc_fragment((1,), "float32")
            tile_sum = T.alloc_fragment((1,), "float32")
            row_max = T.alloc_fragment((1,), "float32")
            row_sum = T.alloc_fragment((1,), "float32")
            T.fill(row_max, -T.infinity("float32"))
            T.fill(row_sum, 0.0)
            for t in T.serial(T.ceildiv(cols, block_N)):
                for i, j in T.Parallel(1, block_N):
                    tile[i, j] = T.if_then_else(t * block_N + j < cols, x[row, t * block_N + j], -T.infinity("float32"))
                T.reduce_max(tile, tile_max, dim=1)
                for i in T.Parallel(1):
                    tile_max[i] = T.max(tile_max[i], row_max[i])
                for i, j in T.Parallel(1, block_N):
                    tile[i, j] = T.exp(tile[i, j] - tile_max[i])
                T.reduce_sum(tile, tile_sum, dim=1)
                for i in T.Parallel(1):
                    row_sum[i] = row_sum[i] * T.exp(row_max[i] - tile_max[i]) + tile_sum[i]
                    row_max[i] = tile_max[i]
            for t in T.serial(T.ceildiv(cols, block_N)):
                for i, j in T.Parallel(1, block_N):
                    if t * block_N + j < cols:
                        out[row, t * block_N + j] = T.exp(x[row, t * block_N + j] - row_max[i]) / row_sum[i]

    return kernel
