#!/usr/bin/env bash
# Every Python package the images install, downloaded with this machine's pip (its index and find-links)
# into docker/wheels/cpu/, so that `docker build` runs without a network (the Dockerfiles install with
# --no-index). torch is the CPU wheel; for the CUDA wheel of a GPU image see docker/README.md.
#   bash docker/wheels.sh            (TORCH_INDEX_URL: where the CPU torch wheel comes from, see below)
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's own python3 (the images' interpreter, 3.11.2): dependency markers such as python_full_version are
# evaluated for the interpreter that downloads.
py=${PYTHON:-/usr/bin/python3}
"$py" -m pip --version >/dev/null 2>&1 || { echo "docker/wheels.sh: $py has no pip (apt-get install python3-pip)" >&2; exit 1; }
dest=docker/wheels/cpu
mkdir -p "$dest"
"$py" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
  > "$dest/requirements.txt"
torch=$(grep '^torch==' "$dest/requirements.txt")
# torch's CPU build is a local version, torch==X+cpu, which PyPI does not have (PyPI's Linux torch is the CUDA build,
# several GB with its nvidia-* wheels): from pip's own sources when they hold it (a wheelhouse in find-links),
# else from PyTorch's CPU index. The requirement torch==X then picks it from $dest (X+cpu sorts above X).
"$py" -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest" "$torch+cpu" 2>/dev/null \
  || "$py" -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest" \
       --index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" "$torch+cpu"
# CUTLASS's headers (the CUTLASS track), installed by the Dockerfile without their dependencies (pyproject.toml says
# why): downloaded alone.
"$py" -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest" nvidia-cutlass==4.2.0.0
# setuptools builds the project itself inside the image (no build isolation there: it would need an index).
"$py" -m pip download --quiet --only-binary=:all: --find-links "$dest" --dest "$dest" -r "$dest/requirements.txt" \
  "setuptools>=68" wheel
for wheel in "$dest"/torch-*.whl; do
  case "$wheel" in
    *+cpu*) ;;
    *) echo "docker/wheels.sh: $wheel is not torch's CPU wheel: remove it" >&2; exit 1 ;;
  esac
done
du -sh "$dest"
