#!/usr/bin/env bash
# .whl/ for a device call that grades any track, the CUTLASS track's included, within the 64 MiB a call carries:
# ../shared/device/wheels.sh's wheels (nbgrader, numpy 2.4, pytest-xdist, and Celery, redis-py and rich, which
# `workshop grade` imports; .whl/prelude.sh installs them), nbgrader's
# wheel without its docs and tests (12 of its 13 MB, never imported by autograde), and the headers the CUTLASS track
# compiles against (nvidia-cutlass, and libcu++ from nvidia-cuda-cccl; the image's nvidia-cuda-runtime brings the
# CUDA headers). 49 MiB in all, beside the project's 7.
# usage (project root): bash benchmarks/device_wheels.sh   then carry ".whl" (and ".debs", for bubblewrap)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash ../shared/device/wheels.sh pytest-xdist==3.8.0 "celery[redis]==5.7.0" redis==8.1.0 rich==15.0.0
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform any -d .whl nvidia-cutlass==4.2.0.0 nvidia-cuda-cccl==13.0.85
slim=$(mktemp -d); trap 'rm -rf "$slim"' EXIT
wheel=$(ls .whl/nbgrader-*.whl)
(cd "$slim" && python3 -m zipfile -e "$OLDPWD/$wheel" . && rm -rf nbgrader/docs nbgrader/tests \
  && rm "$OLDPWD/$wheel" && python3 -m zipfile -c "$OLDPWD/$wheel" ./*)
mkdir -p .debs && grep -qx "/.debs/" .git/info/exclude || echo "/.debs/" >> .git/info/exclude
ls .debs/bubblewrap_*.deb >/dev/null 2>&1 || (cd .debs && apt-get download bubblewrap)
echo "$(du -sh .whl | cut -f1) in .whl, $(git ls-files -z | du -ch --files0-from=- | tail -1 | cut -f1) tracked"
