#!/usr/bin/env bash
# The GEMM worklog on a GPU worker, in two stages that each fit one 10-minute device call. Run from the repo
# root (after `source .whl/prelude.sh` on the lent H200):
#   bash benchmarks/gpu_gemm.sh tests   # GPU tests: references at 4096^3 (JSON + chart), known-wrong kernels,
#                                       # autotuning, ncu bank conflicts; then nbgrader autograde on the GPU
#   bash benchmarks/gpu_gemm.sh bench   # a second size merged into the latest JSON (or $GEMM_MERGE), the launch
#                                       # variants of warp tiling, and ncu's profile of it and of cuBLAS
#   bash benchmarks/gpu_gemm.sh         # both
# Writes into $OUT (default benchmarks/results/gemm): gemm-env.txt, the logs, gemm-<date>.json/.png,
# gemm-track-nbgrader-gpu-<date>.json, gemm-ncu-profile.txt. Then, here: `workshop targets gemm
# benchmarks/results/gemm/gemm-<date>.json --fraction 0.92 --write` sets the spec's targets.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results/gemm}"
mkdir -p "$OUT" benchmarks/results/gemm
export OUT PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg
stages="${1:-tests bench}"
rc=0

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv
  timeout 30 python3 - <<'PY'
from importlib import metadata
for dist in ("torch", "cuda-core", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "numpy",
             "matplotlib", "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm", "nbgrader"):
    try:
        print(f"{dist}=={metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        print(f"{dist}: not installed")
import torch
from cuda.bindings import nvrtc
print("torch.cuda", torch.version.cuda, "available:", torch.cuda.is_available())
print("NVRTC loaded:", nvrtc.nvrtcVersion()[1:])
from graders.gpu import detect_gpu
print("detect_gpu:", detect_gpu())
from graders.cuda_engine.sass import find_tool
print("cuobjdump:", find_tool("cuobjdump"), " nvdisasm:", find_tool("nvdisasm"))
PY
  command -v ncu && ncu --version | tail -1
} 2>&1 | tee "$OUT/gemm-env.txt"

step() {   # step NAME LIMIT_S COMMAND...: run with a time limit, log to $OUT/gemm-NAME.log, keep the first failure
  local name=$1 limit=$2 start; shift 2
  start=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$OUT/gemm-$name.log"
  local status=$?
  echo "$name: exit $status after $(( $(date +%s) - start )) s" | tee -a "$OUT/gemm-$name.log"
  (( rc == 0 )) && rc=$status
}

if [[ " $stages " == *" tests "* ]]; then
  GEMM_TEST_BUDGET_S=1.5 step gpu-tests 240 python3 -m pytest -m gpu tests/gpu/test_gemm_gpu.py -q -s -p no:cacheprovider -rsxf
  step nbgrader 400 python3 -m pytest -m gpu tests/gpu/test_tracks_nbgrader_gpu.py -k gemm -q -s -p no:cacheprovider -rsxf
fi
if [[ " $stages " == *" bench "* ]]; then
  latest=${GEMM_MERGE:-$(ls -t "$OUT"/gemm-2*.json benchmarks/results/gemm/gemm-2*.json 2>/dev/null | head -1)}
  step bench "${GEMM_BENCH_LIMIT_S:-240}" env WORKSHOP_SANDBOX=off python3 -m benchmarks.gemm_bench --sizes 2048 --budget-s 1 --no-ncu --variants --out "$OUT" \
    ${latest:+--merge "$latest"}
  step profile "${GEMM_PROFILE_LIMIT_S:-150}" bash -c "python3 -m benchmarks.gemm_bench --profile warptiling variant5 cublas > '$OUT/gemm-ncu-profile.txt'"
fi
echo "stages: $stages; exit $rc"
exit $rc
