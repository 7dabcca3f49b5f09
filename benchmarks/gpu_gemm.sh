#!/usr/bin/env bash
# The GEMM worklog on a GPU worker: GPU tests (references at 4096^3, known-wrong kernels, autotuning, ncu
# bank conflicts), then the benchmark at a second size (and warp-tiling variants at 4096^3) merged into the
# same JSON. Run from the repo root:
#   bash benchmarks/gpu_gemm.sh
# Writes into $OUT (default benchmarks/results): gemm-env.txt, gemm-gpu-tests.log, gemm-bench.log,
# gemm-<date>.json and gemm-<date>.png (also kept in benchmarks/results/). About 5 minutes; each step has
# its own time limit so the whole stays under 8.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT" benchmarks/results
export OUT PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv
  timeout 30 python3 - <<'PY'
from importlib import metadata
for dist in ("torch", "cuda-core", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "numpy",
             "matplotlib", "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"):
    try:
        print(f"{dist}=={metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        print(f"{dist}: not installed")
import torch
print("torch.cuda", torch.version.cuda, "available:", torch.cuda.is_available())
from graders.gpu import detect_gpu
print("detect_gpu:", detect_gpu())
from graders.sass import find_tool
print("cuobjdump:", find_tool("cuobjdump"), " nvdisasm:", find_tool("nvdisasm"))
PY
  command -v ncu && ncu --version | tail -1
} 2>&1 | tee "$OUT/gemm-env.txt"

start=$(date +%s)
timeout 290 python3 -m pytest -m gpu tests/gpu/test_gemm_gpu.py -q -s -p no:cacheprovider -rsxf 2>&1 \
  | tee "$OUT/gemm-gpu-tests.log"
tests_rc=$?
echo "gpu tests: $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm-gpu-tests.log"

latest=$(ls -t "$OUT"/gemm-2*.json 2>/dev/null | head -1)
start=$(date +%s)
timeout 140 python3 benchmarks/gemm_bench.py --sizes 2048 --budget-s 1.5 --no-ncu --variants --out "$OUT" \
  ${latest:+--merge "$latest"} 2>&1 | tee "$OUT/gemm-bench.log"
bench_rc=$?
echo "benchmark: $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm-bench.log"

echo "gpu tests exit $tests_rc, benchmark exit $bench_rc" | tee -a "$OUT/gemm-bench.log"
exit $(( tests_rc != 0 ? tests_rc : bench_rc ))
