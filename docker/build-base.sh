#!/usr/bin/env bash
# The base image of the fleet's images, built from Debian's packages: no image registry is needed.
#   bash docker/build-base.sh [TAG]        (as root; default tag kernel-workshop/debian:bookworm)
# debootstrap installs a minimal bookworm (Python, venv, bubblewrap for the grading sandbox) into a folder,
# which `docker import` turns into an image. DEBIAN_MIRROR picks the mirror (default: deb.debian.org).
set -euo pipefail
tag=${1:-kernel-workshop/debian:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
for tool in debootstrap docker; do
  command -v "$tool" >/dev/null || { echo "build-base.sh needs $tool (apt-get install debootstrap docker.io)" >&2; exit 1; }
done
root=$(mktemp -d /var/tmp/kernel-workshop-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,bubblewrap,ca-certificates,procps \
  bookworm "$root" "$mirror"
cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/* "$root"/tmp/*
# The daemon's own stamp on the image: the Debian release and the mirror it came from.
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  --message "debootstrap --variant=minbase bookworm from $mirror" - "$tag"
echo "built $tag"
