#!/usr/bin/env bash
# The transpose ladder on a GPU worker, in one call of about 5-6 minutes (each step has its own timeout;
# at most 9.5 minutes in all): environment, the GPU tests, nbgrader autograding three submissions, the
# benchmark. From the repo root, after the wheels prelude (nbgrader 0.9.6 and numpy 2.4 on PYTHONPATH):
#   source .whl/prelude.sh && bash benchmarks/gpu_transpose.sh
# Without the prelude the nbgrader step is skipped (no nbgrader) and the rest still runs.
# Writes into $OUT (default benchmarks/results/transpose): transpose-env.txt, transpose-gpu-tests.log,
# transpose-nbgrader-gpu.log, transpose-bench.log, transpose-<date>.json and
# transpose-nbgrader-gpu-<date>.json (both also kept in benchmarks/results/transpose/). Then, here:
# `workshop targets transpose benchmarks/results/transpose/transpose-<date>.json --write` sets the spec's targets.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results/transpose}"
mkdir -p "$OUT" benchmarks/results/transpose
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OUT
# per-kernel timing budget of the nbgrader step (the spec's 10 s is for real grading)
export WORKSHOP_PERF_BUDGET_S="${WORKSHOP_PERF_BUDGET_S:-1.5}"
start=$SECONDS

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv
  timeout 60 python3 - <<'PY'
from importlib import metadata
for dist in ("torch", "cuda-core", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "numpy", "nvidia-ml-py",
             "nbgrader"):
    try:
        print(f"{dist}=={metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        print(f"{dist}: not installed")
import numpy, torch
print("numpy imported from", numpy.__file__)
print("torch.cuda", torch.version.cuda, "available:", torch.cuda.is_available())
from graders.gpu import detect_gpu
print("detect_gpu:", detect_gpu())
PY
  command -v ncu && ncu --version | tail -1
  command -v cuobjdump
} 2>&1 | tee "$OUT/transpose-env.txt"

timeout 170 python3 -m pytest -m gpu tests/gpu/test_transpose_gpu.py -q -s -p no:cacheprovider 2>&1 \
  | tee "$OUT/transpose-gpu-tests.log"
tests_rc=$?
echo "[gpu_transpose] GPU tests exit $tests_rc after $((SECONDS - start)) s" | tee -a "$OUT/transpose-gpu-tests.log"

if python3 -c "import nbgrader" 2>/dev/null; then
  timeout 400 python3 -m pytest -m gpu tests/gpu/test_transpose_nbgrader_gpu.py tests/gpu/test_tracks_nbgrader_gpu.py \
    -k transpose -q -s -p no:cacheprovider 2>&1 \
    | tee "$OUT/transpose-nbgrader-gpu.log"
  nbgrader_rc=$?
else
  echo "nbgrader is not importable: source .whl/prelude.sh first; nbgrader step skipped" \
    | tee "$OUT/transpose-nbgrader-gpu.log"
  nbgrader_rc=5
fi
echo "[gpu_transpose] nbgrader exit $nbgrader_rc after $((SECONDS - start)) s" | tee -a "$OUT/transpose-nbgrader-gpu.log"

timeout 150 python3 -m benchmarks.transpose_bench --out "$OUT" --budget-s 3 2>&1 | tee "$OUT/transpose-bench.log"
bench_rc=$?

echo "gpu tests exit $tests_rc, nbgrader exit $nbgrader_rc, benchmark exit $bench_rc; $((SECONDS - start)) s in all" \
  | tee -a "$OUT/transpose-bench.log"
for rc in $tests_rc $nbgrader_rc $bench_rc; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
