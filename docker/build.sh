#!/usr/bin/env bash
# Build the fleet's images from Debian's packages and the package index; no image registry is needed.
#   bash docker/build.sh            (as root, dockerd running; UID=<uid> for the images' user, default 1000)
# 1. kernel-workshop/debian:bookworm   debootstrap, then docker import (docker/build-base.sh), if missing
# 2. kernel-workshop/services          redis-server and PostgreSQL 15 from Debian's packages
# 3. kernel-workshop/python:cpu        a venv with the pinned dependencies, the CPU torch wheel (docker/wheels.sh)
# 4. kernel-workshop/worker, kernel-workshop/coordinator   the project, from docker/context.py's context
set -euo pipefail
cd "$(dirname "$0")/.."
uid=${UID_IN_IMAGES:-1000}
export DOCKER_BUILDKIT=0   # the classic builder: Debian's docker.io has no buildx
docker image inspect kernel-workshop/debian:bookworm >/dev/null 2>&1 || bash docker/build-base.sh
[ -s docker/wheels/cpu/requirements.txt ] || bash docker/wheels.sh
docker build --network host -t kernel-workshop/services -f docker/services.Dockerfile docker
docker build --network none -t kernel-workshop/python:cpu -f docker/python.Dockerfile docker/wheels/cpu
context=$(mktemp -d /var/tmp/kernel-workshop-context.XXXXXX)
trap 'rm -rf "$context"' EXIT
"${PYTHON:-.venv/bin/python}" docker/context.py "$context/app"
for image in worker coordinator; do
  docker build --network none --build-arg UID="$uid" -t "kernel-workshop/$image" -f "docker/$image.Dockerfile" \
    "$context/app"
done
docker images 'kernel-workshop/*'
