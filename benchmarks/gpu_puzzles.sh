#!/usr/bin/env bash
# The puzzles track autograded by nbgrader on a GPU worker. From the repo root, after the wheels prelude
# (../shared/device/wheels.sh pytest-xdist==3.8.0 builds .whl/ with nbgrader, numpy 2.4 and the xdist plugin that
# pytest's addopts name):
#   source .whl/prelude.sh && bash benchmarks/gpu_puzzles.sh
# Writes $OUT/puzzles-gpu-tests.log and benchmarks/results/puzzles/puzzles-nbgrader-gpu-<date>.json (also in
# $OUT; its default is that folder).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results/puzzles}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OUT
python3 -c "import numba, numba.cuda, numpy, nbgrader; print('numba', numba.__version__, 'numpy', numpy.__version__, 'nbgrader', nbgrader.__version__)"
timeout 540 python3 -m pytest -m gpu tests/gpu/test_puzzles_gpu.py -q -s -p no:cacheprovider 2>&1 \
  | tee "$OUT/puzzles-gpu-tests.log"
