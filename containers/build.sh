#!/usr/bin/env bash
# Builds one training image offline-friendly: makes the local base image when it is the
# default and missing, and hands the build an extra CA bundle (build stage only).
# Usage: containers/build.sh STACK [VARIANT]      e.g. containers/build.sh tensorflow cpu
# Env:   BASE_IMAGE (default scalebench/debian-base:bookworm), IMAGE_TAG (default cpu),
#        TORCH_CUDA_ARCH_LIST, MAX_JOBS, CUDA_TOOLCHAIN (mmdet's mmcv compile; the Dockerfile's defaults otherwise),
#        SCALEBENCH_EXTRA_CA (default: the host's /etc/ssl/certs/ca-certificates.crt)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stack="${1:?usage: build.sh STACK [VARIANT]}"
variant="${2:-cpu}"
base="${BASE_IMAGE:-scalebench/debian-base:bookworm}"
image="scalebench/${stack}:${IMAGE_TAG:-$variant}"
[ -f "$here/$stack/Dockerfile" ] || { echo "build.sh: no Dockerfile at $here/$stack/Dockerfile" >&2; exit 1; }
if [ "$base" = "scalebench/debian-base:bookworm" ]; then "$here/base/make-base-image.sh" "$base"; fi
"$here/build-ca.sh"
mkdir -p "$here/.wheels/$stack"  # wheels a build needs from the host (e.g. torch's CPU build)
if [ "$variant" = cpu ] && [ -x "$here/$stack/fetch-wheels.sh" ]; then "$here/$stack/fetch-wheels.sh" >/dev/null; fi
# settings a Dockerfile declares (mmdet's CUDA compile), passed on when set
extra=()
for arg in TORCH_CUDA_ARCH_LIST MAX_JOBS CUDA_TOOLCHAIN; do
  if [ -n "${!arg:-}" ] && grep -q "^ARG $arg=" "$here/$stack/Dockerfile"; then extra+=(--build-arg "$arg=${!arg}"); fi
done
echo "building $image from $base ($variant)"
DOCKER_BUILDKIT=0 docker build -q -f "$here/$stack/Dockerfile" "${extra[@]}" \
  --build-arg BASE_IMAGE="$base" --build-arg VARIANT="$variant" -t "$image" "$here" >/dev/null 2> >(grep -v -e "^DEPRECATED: The legacy builder" -e "BuildKit is currently disabled" -e "^ *environment-variable" -e "^$" >&2)
docker image inspect -f "$image {{.Id}} {{.Size}} bytes" "$image"
