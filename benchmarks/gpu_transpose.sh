#!/usr/bin/env bash
# The transpose ladder on a GPU worker: GPU tests, then the benchmark. Run from the repo root:
#   bash benchmarks/gpu_transpose.sh
# Writes into $OUT (default benchmarks/results): transpose-env.txt, transpose-gpu-tests.log,
# transpose-bench.log and transpose-<date>.json (also kept in benchmarks/results/). About 5 minutes.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT" benchmarks/results
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv
  python3 - <<'PY'
from importlib import metadata
for dist in ("torch", "cuda-core", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "numpy", "nvidia-ml-py"):
    try:
        print(f"{dist}=={metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        print(f"{dist}: not installed")
import torch
print("torch.cuda", torch.version.cuda, "available:", torch.cuda.is_available())
from graders.gpu import detect_gpu
print("detect_gpu:", detect_gpu())
PY
  command -v ncu && ncu --version | tail -1
} 2>&1 | tee "$OUT/transpose-env.txt"

timeout 270 python3 -m pytest -m gpu tests/gpu/test_transpose_gpu.py -x -q -s -p no:cacheprovider 2>&1 \
  | tee "$OUT/transpose-gpu-tests.log"
tests_rc=$?

timeout 200 python3 benchmarks/transpose_bench.py --out "$OUT" --budget-s 4 2>&1 | tee "$OUT/transpose-bench.log"
bench_rc=$?

echo "gpu tests exit $tests_rc, benchmark exit $bench_rc" | tee -a "$OUT/transpose-bench.log"
exit $(( tests_rc != 0 ? tests_rc : bench_rc ))
