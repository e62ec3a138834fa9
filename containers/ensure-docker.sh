#!/usr/bin/env bash
# Makes sure a Docker engine answers. On Debian as root with none running, installs
# docker.io and starts dockerd in the background; elsewhere says what to do.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  if ! command -v dockerd >/dev/null; then
    echo "installing docker.io and debootstrap (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
  fi
  echo "starting dockerd (log: /var/log/scalebench-dockerd.log)"
  nohup dockerd >/var/log/scalebench-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done
  echo "ensure-docker: dockerd did not answer within 60 s; see /var/log/scalebench-dockerd.log" >&2
  exit 1
fi
echo "ensure-docker: no Docker engine answers at ${DOCKER_HOST:-unix:///var/run/docker.sock}." >&2
echo "Start Docker (or set DOCKER_HOST) and run again." >&2
exit 1
