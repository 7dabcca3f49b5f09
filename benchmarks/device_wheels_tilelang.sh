#!/usr/bin/env bash
# The TileLang track's wheels for a device run, in two carries: tilelang (50 MB) and z3-solver (29 MB), which it
# imports, do not fit one call's 64 MiB beside nbgrader's wheels. Run benchmarks/device_wheels.sh first; this writes
#   .whl-tilelang/        tilelang alone. Call 1 installs it where it stays while the machine is held:
#                           carry [".whl-tilelang"], command
#                           python3 -m pip install -q --no-index --no-deps --target /tmp/tilelang .whl-tilelang/*.whl
#   .whl-tilelang-deps/   tilelang's other wheels and .whl's without numpy 2.4 (for numba-cuda, which this track does
#                         not run), CUTLASS and libcu++, with a prelude. Call 2, at once (an idle machine goes back
#                         after 30 s, and with it /tmp/tilelang): carry [".whl-tilelang-deps", ".debs"], command
#                           source .whl-tilelang-deps/prelude.sh || exit 1; bash benchmarks/gpu_trusted.sh grading tilelang
# usage (project root): bash benchmarks/device_wheels.sh && bash benchmarks/device_wheels_tilelang.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -f .whl/prelude.sh ] || { echo "run benchmarks/device_wheels.sh first" >&2; exit 2; }
download() {   # folder, requirements...: wheels for the device's Python 3.12 on x86-64
  local folder=$1; shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$folder" "$@" 2>&1 | grep -v WARNING || true
}
rm -rf .whl-tilelang .whl-tilelang-deps
mkdir .whl-tilelang .whl-tilelang-deps
for folder in .whl-tilelang .whl-tilelang-deps; do
  grep -qx "/$folder/" .git/info/exclude || echo "/$folder/" >> .git/info/exclude
done
download .whl-tilelang tilelang==0.1.15
download .whl-tilelang-deps apache-tvm-ffi==0.1.12 z3-solver==4.15.4.0 ml-dtypes==0.7.0 torch-c-dlpack-ext==0.1.5 \
  cloudpickle==3.1.3 tqdm==4.70.1
for wheel in .whl/*.whl; do
  case "$(basename "$wheel")" in numpy-*|nvidia_cutlass-*|nvidia_cuda_cccl-*) ;; *) cp "$wheel" .whl-tilelang-deps/ ;; esac
done
sed -e 's|\.whl/\*\.whl|.whl-tilelang-deps/*.whl|' -e 's|installs \.whl/|installs .whl-tilelang-deps/ (and /tmp/tilelang)|' \
    -e 's|^export PYTHONPATH=/tmp/site|export PYTHONPATH=/tmp/tilelang:/tmp/site|' .whl/prelude.sh > .whl-tilelang-deps/prelude.sh
cat >> .whl-tilelang-deps/prelude.sh <<'PRE'
[ -d /tmp/tilelang/tilelang ] || { echo "no /tmp/tilelang: install .whl-tilelang there in the call just before" >&2; return 1; }
PRE
tracked=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
for folder in .whl-tilelang .whl-tilelang-deps; do
  bytes=$(( $(du -sb "$folder" | cut -f1) + tracked ))
  echo "$folder: $(du -sh "$folder" | cut -f1), with the tracked files $((bytes >> 20)) MiB of the 64 a call carries"
done
