#!/usr/bin/env bash
# Builds the GPU variant of every stack (make images-gpu), each after the stack it is built FROM,
# on a CUDA devel base: GPU_BASE_IMAGE when named, else scalebench/cuda-devel:<CUDA_VERSION>-bookworm
# made here from containers/base/cuda-devel.Dockerfile (NVIDIA's Debian 12 CUDA repository: the
# build needs the network). mmcv's CUDA ops are compiled for TORCH_CUDA_ARCH_LIST.
# Env: GPU_BASE_IMAGE, CUDA_VERSION (12.8), TORCH_CUDA_ARCH_LIST ("8.0;8.6;8.9;9.0+PTX"), MAX_JOBS (4)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cuda="${CUDA_VERSION:-12.8}"
base="${GPU_BASE_IMAGE:-}"
if [ -z "$base" ]; then
  base="scalebench/cuda-devel:${cuda}-bookworm"
  "$here/base/make-base-image.sh"
  echo "building $base (CUDA $cuda toolkit from NVIDIA's Debian 12 repository)"
  DOCKER_BUILDKIT=0 docker build -q -f "$here/base/cuda-devel.Dockerfile" --build-arg CUDA_VERSION="$cuda" \
    -t "$base" "$here/base" >/dev/null
fi
sb="${SCALEBENCH_CLI:-$here/../.venv/bin/scalebench}"
for stack in $(SCALEBENCH_PROJECT_DIR="$here/.." "$sb" stacks --build-order); do
  BASE_IMAGE="$base" IMAGE_TAG=gpu "$here/build.sh" "$stack" gpu
done
