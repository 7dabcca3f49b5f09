# expect: softmax_score=0
# status: incorrect
# No max subtracted: exp of a logit above 88.7 overflows fp32 to inf, and inf / inf is NaN, so rows with logits in
# the hundreds come out NaN (and rows of logits hundreds below zero underflow to 0 / 0).
@tilelang.jit
def softmax(block_N=1024, threads=128):
    rows, cols = T.dynamic("rows"), T.dynamic("cols")

    @T.prim_func
    def kernel(out: T.Tensor((rows, cols), "float32"), x: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows, threads=threads) as row:
            tile = T.alloc_fragment((1, block_N), "float32")
            tile_sum = T.alloc_fragment((1,), "float32")
            row_sum = T.alloc_fragment((1,), "float32")
            T.fill(row_sum, 0.0)
            for t in T.serial(T.ceildiv(cols, block_N)):
                for i, j in T.Parallel(1, block_N):
                    tile[i, j] = T.if_then_else(t * block_N + j < cols, x[row, t * block_N + j], -T.infinity("float32"))
                for i, j in T.Parallel(1, block_N):
                    tile[i, j] = T.exp(tile[i, j])
                T.reduce_sum(tile, tile_sum, dim=1)
                for i in T.Parallel(1):
                    row_sum[i] = row_sum[i] + tile_sum[i]
            for t in T.serial(T.ceildiv(cols, block_N)):
                for i, j in T.Parallel(1, block_N):
                    if t * block_N + j < cols:
                        out[row, t * block_N + j] = T.exp(x[row, t * block_N + j]) / row_sum[i]

    return kernel
