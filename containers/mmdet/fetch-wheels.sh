#!/usr/bin/env bash
# Puts a prebuilt mmcv wheel into containers/.wheels/mmdet/ when SCALEBENCH_WHEELHOUSE names a
# folder that has it and its sha256 matches mmcv-wheel.sha256 (a wheel built for another torch
# would load and then crash). Without one the image builds mmcv from its sdist (about 13 minutes
# on 2 cores, in a cached layer). The folder is emptied first, so a removed wheelhouse means a
# source build, never a stale wheel.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${WHEELS_OUT:-$here/.wheels/mmdet}"
rm -rf "$out"; mkdir -p "$out"
read -r want name < "$here/mmdet/mmcv-wheel.sha256"
src="${SCALEBENCH_WHEELHOUSE:-}/$name"
if [ -n "${SCALEBENCH_WHEELHOUSE:-}" ] && [ -f "$src" ]; then
  got="$(sha256sum "$src" | cut -d' ' -f1)"
  if [ "$got" = "$want" ]; then cp "$src" "$out/"; echo "mmcv: prebuilt wheel from $SCALEBENCH_WHEELHOUSE"; exit 0; fi
  echo "fetch-wheels: $src has sha256 $got, expected $want: not used, mmcv is built from source" >&2
fi
echo "mmcv: no prebuilt wheel (SCALEBENCH_WHEELHOUSE=${SCALEBENCH_WHEELHOUSE:-unset}): built from source in the image"
