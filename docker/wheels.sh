#!/usr/bin/env bash
# Every Python package the images install, downloaded with this machine's pip (its index and find-links)
# into docker/wheels/cpu/, so that `docker build` runs without a network (the Dockerfiles install with
# --no-index). torch is the CPU wheel; for the CUDA wheel of a GPU image see docker/README.md.
#   bash docker/wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's own python3 (the images' interpreter, 3.11.2): dependency markers such as python_full_version are
# evaluated for the interpreter that downloads.
py=${PYTHON:-/usr/bin/python3}
dest=docker/wheels/cpu
mkdir -p "$dest"
"$py" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
  > "$dest/requirements.txt"
# libcudart, which numba-cuda loads even to run the simulator: a development machine or CI brings it with its
# CUDA install (/usr/local/cuda-*), a bare image does not. The version of the pinned NVRTC.
echo "nvidia-cuda-runtime==13.5.37" >> "$dest/requirements.txt"
# setuptools builds the project itself inside the image (no build isolation there: it would need an index).
"$py" -m pip download --quiet --only-binary=:all: --dest "$dest" -r "$dest/requirements.txt" "setuptools>=68" wheel
case "$(ls "$dest"/torch-2.13.0*.whl)" in
  *+cpu*) ;;
  *) echo "docker/wheels.sh: torch is not the CPU wheel: $(ls "$dest"/torch-*.whl)" >&2; exit 1 ;;
esac
du -sh "$dest"
