"""Lecture 6's quiz, tensor cores: its questions (public; the answers are in key.py)."""
from graders.quiz_engine.questions import Choice, Line, Numeric

TITLE = "Quiz, lecture 6: tensor cores"
INTRO = """
From the chapter *Tensor cores* and the tensor-core steps of the GEMM track: warp-level matrix multiply-accumulate
(`D = A B + C` with A m x k, B k x n, C and D m x n) through WMMA fragments and `mma.sync`, `ldmatrix`, swizzled
shared memory and the precision formats. A multiply-add is 2 FLOPs. A warp is 32 threads; a register is 32 bits.
Shared memory has 32 banks of 4 bytes: the byte at offset *a* of a 128-byte-aligned array is in bank (*a* / 4)
mod 32.
"""
SHAPES = [(16, 8, 8), (16, 8, 16), (16, 8, 32), (16, 16, 16), (32, 8, 16), (8, 32, 16)]
BYTES = {"fp16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "fp32": 4}
# (instruction, operand, its element type): the fragments of the mma.sync shapes for each input precision
FRAGMENTS = [("m16n8k16", op, t) for op, t in (("A", "fp16"), ("B", "fp16"), ("C", "fp32"), ("C", "fp16"))]
FRAGMENTS += [("m16n8k8", op, t) for op, t in (("A", "tf32"), ("B", "tf32"), ("C", "fp32"))]
FRAGMENTS += [("m16n8k32", op, t) for op, t in (("A", "e4m3"), ("B", "e4m3"), ("C", "fp32"))]

QUESTIONS = [
    Numeric("mma_flops", "The FLOPs of one warp-level MMA of the shape m x n x k the cell below gives you.",
            lambda r: dict(zip("mnk", r.choice(SHAPES))),
            given="m = {m}, n = {n}, k = {k}", unit="FLOP", abs_tol=0),
    Numeric("mma_count", "A block computes a BM x BN tile of C over the whole of K with `mma.sync.m16n8k16` "
            "instructions, each computing a 16 x 8 piece of the tile over 16 values of K. How many `mma.sync` "
            "instructions does the block issue in all?",
            lambda r: {"bm": r.choice([64, 128, 256]), "bn": r.choice([64, 128, 256]),
                       "k": r.choice([1024, 2048, 4096])},
            given="BM = {bm}, BN = {bn}, K = {k}", unit="instructions", abs_tol=0),
    Numeric("fragment_registers", "For the `mma.sync` instruction the cell below names, how many registers does "
            "each thread of the warp hold for the named operand (A is m x k, B is k x n, C is m x n; its elements "
            "are spread evenly over the 32 threads, packed into 32-bit registers)?",
            lambda r: dict(zip(("shape", "operand", "dtype"), r.choice(FRAGMENTS))),
            given="mma.sync.{shape}, operand {operand} in {dtype}", unit="registers", abs_tol=0),
    Choice("ldmatrix", "What does `ldmatrix.sync.aligned.m8n8.x4.shared.b16` do?",
           {"a": "each thread loads four 16-bit values from global memory into shared memory",
            "b": "the warp loads four 8 x 8 matrices of 16-bit elements from shared memory: each thread gives the "
                 "address of one 16-byte row, and each thread receives, in four registers, its part of every matrix "
                 "in the layout `mma.sync` expects",
            "c": "it multiplies four 8 x 8 matrices on the tensor cores",
            "d": "thread 0 loads the whole 16 x 16 tile and broadcasts it to the warp"}),
    Numeric("swizzle_bank", "A tile of fp16 values is stored in shared memory in rows of 128 bytes, eight 16-byte "
            "chunks per row. To keep `ldmatrix` free of bank conflicts, chunk *c* of row *r* is stored at chunk "
            "position *c* XOR (*r* mod 8) of its row. In which bank does the first 4-byte word of chunk *c* of row "
            "*r* land?",
            lambda r: {"r": r.randrange(64), "c": r.randrange(8)},
            given="r = {r}, c = {c}", unit="", abs_tol=0),
    Choice("bf16", "Which format keeps fp32's 8 exponent bits (so fp32's range) with 7 explicit mantissa bits?",
           {"a": "fp16", "b": "bf16", "c": "TF32", "d": "fp8 e4m3"}),
    Numeric("largest_value", "The largest finite value of the format the cell below names.",
            lambda r: {"fmt": r.choice(["fp16", "bf16", "fp8 e4m3", "fp8 e5m2"])},
            given="{fmt}", unit="", rel_tol=0.01),
    Choice("tf32", "With `torch.backends.cuda.matmul.allow_tf32 = True`, what happens in an fp32 matmul on an H100?",
           {"a": "the inputs are rounded to TF32 (10 mantissa bits, fp32's 8 exponent bits), multiplied on the "
                 "tensor cores, and the products accumulated in fp32",
            "b": "the inputs and the output are stored in memory as 19-bit TF32 values",
            "c": "nothing changes: fp32 matmuls always run on the CUDA cores",
            "d": "the inputs are converted to bf16 and the result is bf16"}),
    Line("leading_dimension", "One warp computes a 16 x 16 tile of `C` (M x N, row-major, fp32) from `A` (M x K, "
         "row-major, fp16) and `B` given as its transpose (N x K, row-major: B column-major). Which line passes the "
         "wrong leading dimension?",
         """\
wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
wmma::fill_fragment(c, 0.0f);
for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + row * K + k, K);
    wmma::load_matrix_sync(b, B + col * K + k, K);
    wmma::mma_sync(c, a, b, c);
}
wmma::store_matrix_sync(C + row * N + col, c, K, wmma::mem_row_major);"""),
]
