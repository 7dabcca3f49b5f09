#!/usr/bin/env bash
# .whl/ for a device call that grades any track, the CUTLASS track's included, within the 64 MiB a call carries:
# ../shared/device/wheels.sh's wheels (nbgrader, numpy 2.4, pytest-xdist, and Celery, redis-py and rich, which
# `workshop grade` imports; .whl/prelude.sh installs them), nbgrader's
# wheel without its docs and tests (12 of its 13 MB, never imported by autograde), and the headers the CUTLASS track
# compiles against (nvidia-cutlass, and libcu++ from nvidia-cuda-cccl; the image's nvidia-cuda-runtime brings the
# CUDA headers). 49 MiB in all, beside the project's 7.
# usage (project root): bash benchmarks/device_wheels.sh   then carry ".whl" (and ".debs", for bubblewrap)
#
# With `tilelang`, also the TileLang track's wheels, in two carries: tilelang (50 MB) and z3-solver (29 MB), which it
# imports, do not fit one call beside nbgrader's wheels.
#   .whl-tilelang/        tilelang, and CUTLASS and libcu++ (the abstraction ladder's CUTLASS rung compiles against
#                         them). Call 1 installs them where they stay while the machine is held:
#                           carry [".whl-tilelang"], command
#                           python3 -m pip install -q --no-index --no-deps --target /tmp/tilelang .whl-tilelang/*.whl
#   .whl-tilelang-deps/   tilelang's other wheels and .whl's without numpy 2.4 (for numba-cuda, which this track does
#                         not run), CUTLASS and libcu++ (in call 1's), with a prelude. Call 2, at once (an idle
#                         machine goes back after 30 s, and with it /tmp/tilelang): carry [".whl-tilelang-deps",
#                         ".debs"], command
#                           source .whl-tilelang-deps/prelude.sh || exit 1; bash benchmarks/gpu_trusted.sh grading tilelang
#                         and in the same command the ladder, every rung (the CUTLASS track's GPU test):
#                           python3 -m pytest -m gpu tests/gpu/test_cutlass_gpu.py -k ladder
# usage: bash benchmarks/device_wheels.sh tilelang
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
download() {   # folder, requirements...: wheels for the device's Python 3.12 on x86-64, without their dependencies
  local folder=$1; shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$folder" "$@" 2>&1 | grep -v WARNING || true
}
ignored() {   # folder: made, and ignored by git
  mkdir -p "$1" && grep -qx "/$1/" .git/info/exclude || echo "/$1/" >> .git/info/exclude
}
tracked=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
size() {   # folder: its size, and with the tracked files what a call carrying it (and .debs) carries
  echo "$1: $(du -sh "$1" | cut -f1), with the tracked files $((($(du -sb "$1" | cut -f1) + tracked) >> 20)) MiB of 64"
}

bash ../shared/device/wheels.sh pytest-xdist==3.8.0 "celery[redis]==5.7.0" redis==8.1.0 rich==15.0.0
download .whl nvidia-cutlass==4.2.0.0 nvidia-cuda-cccl==13.0.85
slim=$(mktemp -d); trap 'rm -rf "$slim"' EXIT
wheel=$(ls .whl/nbgrader-*.whl)
(cd "$slim" && python3 -m zipfile -e "$OLDPWD/$wheel" . && rm -rf nbgrader/docs nbgrader/tests \
  && rm "$OLDPWD/$wheel" && python3 -m zipfile -c "$OLDPWD/$wheel" ./*)
ignored .debs
ls .debs/bubblewrap_*.deb >/dev/null 2>&1 || (cd .debs && apt-get download bubblewrap)
size .whl
[ "${1:-}" = tilelang ] || exit 0

rm -rf .whl-tilelang .whl-tilelang-deps
ignored .whl-tilelang
ignored .whl-tilelang-deps
download .whl-tilelang tilelang==0.1.15
cp .whl/nvidia_cutlass-*.whl .whl/nvidia_cuda_cccl-*.whl .whl-tilelang/
download .whl-tilelang-deps apache-tvm-ffi==0.1.12 z3-solver==4.15.4.0 ml-dtypes==0.6.0 torch-c-dlpack-ext==0.1.5 \
  cloudpickle==3.1.3 tqdm==4.70.1
for wheel in .whl/*.whl; do
  case "$(basename "$wheel")" in numpy-*|nvidia_cutlass-*|nvidia_cuda_cccl-*) ;; *) cp "$wheel" .whl-tilelang-deps/ ;; esac
done
sed -e 's|\.whl/\*\.whl|.whl-tilelang-deps/*.whl|' -e 's|installs \.whl/|installs .whl-tilelang-deps/ (and /tmp/tilelang)|' \
    -e 's|^export PYTHONPATH=/tmp/site|export PYTHONPATH=/tmp/tilelang:/tmp/site|' .whl/prelude.sh > .whl-tilelang-deps/prelude.sh
cat >> .whl-tilelang-deps/prelude.sh <<'PRE'
[ -d /tmp/tilelang/tilelang ] || { echo "no /tmp/tilelang: install .whl-tilelang there in the call just before" >&2; return 1; }
PRE
size .whl-tilelang
size .whl-tilelang-deps
