#!/usr/bin/env bash
# Makes the CPU base image without any registry: a debootstrapped Debian 12 root file
# system imported into the local Docker engine (Docker Hub is unreachable on our machines).
# Usage: make-base-image.sh [IMAGE]   (default scalebench/debian-base:bookworm)
set -euo pipefail
image="${1:-scalebench/debian-base:bookworm}"
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "base image $image already present"; exit 0
fi
if ! command -v debootstrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  else
    echo "make-base-image: debootstrap is not installed (Debian: apt-get install debootstrap)" >&2; exit 1
  fi
fi
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
rootfs="$(mktemp -d /tmp/scalebench-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm into $rootfs (about 80 s)"
debootstrap --variant=minbase \
  --include=python3,python3-venv,python3-pip,ca-certificates \
  bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || { tail -30 "$rootfs.log" >&2; exit 1; }
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["/bin/bash"]' - "$image"
echo "imported $image"
