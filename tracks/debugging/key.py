"""The debugging track's answer key (`graders.quiz_engine`): the diagnosis of each sabotaged kernel, and the
Nsight Compute deep-read read off the records its notebook shows (benchmarks/results/gemm/gemm-ncu-profile-4096-
20261202.txt: sgemm_warptiling; benchmarks/results/attention/attention-ncu-profile-20261204-8x32x32768x128.txt:
attention_decode; benchmarks/results/tensorcores/tensorcores-ncu-profile-20261204.txt: tc_warptiling)."""
from graders import tracks

SABOTAGED = tracks.get("debugging").problem_module().SABOTAGED


def _line(kernel: str, text: str) -> int:
    """The number (from 1) of the one line of the sabotaged ``kernel`` that holds ``text``."""
    (number,) = [i for i, line in enumerate(SABOTAGED[kernel].split("\n"), 1) if text in line]
    return number


KEY = {
    # the barrier skipped at s = 32: threads 0-31 read buf[32..63], which warp 1 wrote without a barrier between
    "reduce_tool": "b", "reduce_line": _line("reduce", "if (s > 32) __syncthreads();"), "reduce_class": "a",
    # a row starts 4 * row * cols bytes in: a float4 there is misaligned unless cols is a multiple of 4
    "copy_tool": "a", "copy_line": _line("copy", "dst[i] = src[i];"), "copy_class": "b",
    # no max subtracted: expf overflows to inf above 88.7 (inf x 0 = NaN) and every expf underflows to 0 far below 0
    "softmax_tool": "e", "softmax_line": _line("softmax", "expf(in[c])"), "softmax_class": "c",
    # the barrier inside `if (c < cols)`: at a row's last chunk the lanes past its end wait in warp 0's shuffle
    "chunked_tool": "f", "chunked_line": _line("chunked", "            __syncthreads();"), "chunked_class": "d",
    # sgemm_warptiling: Compute (SM) Throughput 75.01%, Memory 57.38%, DRAM 2.76%; the only stall named is "not
    # selected" (0.9 of 2.58 cycles, 33.9%); Achieved Occupancy 12.50%: Block Limit Registers 1 (223 per thread)
    # and Block Limit Shared Mem 1
    "gemm_limit": "b", "gemm_stall": "b", "gemm_occupancy": lambda n: 12.5, "gemm_occupancy_why": "a",
    "gemm_dram": lambda n: 0.0276,
    # attention_decode: DRAM Throughput 75.73%, Compute (SM) 41.38%; L1TEX scoreboard 13.6 of 18.3 cycles (74.2%);
    # Theoretical Occupancy 75%, Achieved 48.39%, Waves Per SM 0.65 (256 blocks, 132 SMs)
    "decode_limit": "a", "decode_stall": "a", "decode_occupancy": lambda n: 48.39, "decode_occupancy_why": "b",
    "decode_dram": lambda n: 0.7573,
    # tc_warptiling: Compute (SM) 43.72%, Memory 37.30%, both under the 60% below which ncu's rule says "latency
    # issues"; the only stall named is a fixed-latency dependency (1.9 of 4.6 cycles, 41.6%); Achieved Occupancy
    # 12.18% of a theoretical 12.50%: Block Limit Registers 2 (236 per thread) and Block Limit Shared Mem 2
    "tc_limit": "c", "tc_stall": "e", "tc_occupancy": lambda n: 12.18, "tc_occupancy_why": "a",
    "tc_dram": lambda n: 0.0955,
}
