#!/usr/bin/env bash
# Builds the GPU variant of every stack (make images-gpu), each after the stack it is built FROM,
# and prints each image's size and build time. Needs PyPI and Debian's mirror, no GPU.
# The frameworks bring their CUDA runtime, cuDNN and NCCL as PyPI wheels and the host's driver comes
# in through the NVIDIA Container Toolkit, so the default base is our Debian 12 base. The one
# compile (mmcv's CUDA ops in the mmdet image) takes NVIDIA's toolchain wheels at exactly the CUDA
# version torch's wheel requires (containers/cuda_toolchain.py).
# Env: TORCH_CUDA_ARCH_LIST ("8.0;8.6;8.9;9.0+PTX"), MAX_JOBS (2),
#      GPU_BASE_IMAGE   a base of your own (Debian 12 based, python3-venv); or
#      CUDA_VERSION     a base with NVIDIA's CUDA toolkit from its Debian 12 apt repository
#                       (containers/base/cuda-devel.Dockerfile; needs that repository), used to compile;
#      CUDA_TOOLCHAIN   pypi (default) | base: compile with the base image's CUDA_HOME instead
#                       (refused in one line when its CUDA is not torch's)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${GPU_BASE_IMAGE:-}"
if [ -z "$base" ] && [ -n "${CUDA_VERSION:-}" ]; then
  base="scalebench/cuda-devel:${CUDA_VERSION}-bookworm"
  "$here/base/make-base-image.sh"
  echo "building $base (CUDA $CUDA_VERSION toolkit from NVIDIA's Debian 12 repository)"
  DOCKER_BUILDKIT=0 docker build -q -f "$here/base/cuda-devel.Dockerfile" --build-arg CUDA_VERSION="$CUDA_VERSION" \
    -t "$base" "$here/base" >/dev/null
  export CUDA_TOOLCHAIN="${CUDA_TOOLCHAIN:-base}"
fi
base="${base:-scalebench/debian-base:bookworm}"
sb="${SCALEBENCH_CLI:-$here/../.venv/bin/scalebench}"
for stack in $(SCALEBENCH_PROJECT_DIR="$here/.." "$sb" stacks --build-order); do
  start=$(date +%s)
  BASE_IMAGE="$base" IMAGE_TAG=gpu "$here/build.sh" "$stack" gpu >/dev/null
  docker image inspect -f "scalebench/$stack:gpu {{.Size}}" "scalebench/$stack:gpu" \
    | awk -v s=$(( $(date +%s) - start )) '{printf "%s: %.2f GB, built in %d s\n", $1, $2 / 1e9, s}'
done
