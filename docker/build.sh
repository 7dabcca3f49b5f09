#!/usr/bin/env bash
# Build the fleet's images from Debian's packages and the package index; no image registry is needed.
#   bash docker/build.sh            (as root, dockerd running; UID_IN_IMAGES=<uid> for the images' user, default 1000)
# 0. checks, and the worker's files staged (docker/context.py, any Python 3.11+: PYTHON, default python3)
# 1. docker/wheels/cpu/               every wheel the images install (docker/wheels.sh), if not downloaded yet
#    kernel-workshop/debian:bookworm   debootstrap, then docker import (docker/build-base.sh), if missing
# 2. kernel-workshop/services          redis-server and PostgreSQL 15 from Debian's packages
# 3. kernel-workshop/python:cpu        a venv with the pinned dependencies, the CPU torch wheel (docker/wheels.sh)
# 4. kernel-workshop/worker, kernel-workshop/coordinator   the project, from docker/context.py's context
set -euo pipefail
cd "$(dirname "$0")/.."
uid=${UID_IN_IMAGES:-1000}
py=${PYTHON:-python3}
fail() { echo "docker/build.sh: $*" >&2; exit 1; }
# Everything that can fail quickly fails before the long builds.
command -v docker >/dev/null || fail "needs docker (apt-get install docker.io)"
docker info >/dev/null 2>&1 || fail "dockerd is not running (docker/README.md says how to start it)"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || fail "needs Python 3.11 or newer as $py to stage the images' files (PYTHON=/path/to/python3.11)"
export DOCKER_BUILDKIT=0   # the classic builder: Debian's docker.io has no buildx
context=$(mktemp -d /var/tmp/kernel-workshop-context.XXXXXX)
trap 'rm -rf "$context"' EXIT
"$py" docker/context.py "$context/app"
[ -s docker/wheels/cpu/requirements.txt ] || bash docker/wheels.sh
docker image inspect kernel-workshop/debian:bookworm >/dev/null 2>&1 || bash docker/build-base.sh
docker build --network host -t kernel-workshop/services -f docker/services.Dockerfile docker
docker build --network none -t kernel-workshop/python:cpu -f docker/python.Dockerfile docker/wheels/cpu
for image in worker coordinator; do
  docker build --network none --build-arg UID="$uid" -t "kernel-workshop/$image" -f "docker/$image.Dockerfile" \
    "$context/app"
done
docker images 'kernel-workshop/*'
