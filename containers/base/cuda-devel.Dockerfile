# An optional GPU base: our Debian 12 base (Python 3.11, as every image's pins are resolved for)
# plus NVIDIA's CUDA toolkit from its Debian 12 apt repository (which must be reachable). Not the
# default: torch and TensorFlow bring their CUDA runtime, cuDNN and NCCL as PyPI wheels, and mmcv's
# CUDA ops are compiled with NVIDIA's toolchain wheels at torch's own CUDA (containers/cuda_toolchain.py).
# Built by `CUDA_VERSION=13.0 make images-gpu` (containers/build-gpu.sh), which then compiles with
# this base's nvcc (CUDA_TOOLCHAIN=base): the build refuses a CUDA_VERSION other than torch's.
ARG BASE_IMAGE=scalebench/debian-base:bookworm
FROM ${BASE_IMAGE}
ARG CUDA_VERSION
ARG CUDA_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
RUN [ -n "$CUDA_VERSION" ] || { echo "cuda-devel: set CUDA_VERSION (torch's, e.g. 13.0)" >&2; exit 1; } \
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates curl g++ python3-dev python3-venv >/dev/null \
 && curl -fsSL -o /tmp/cuda-keyring.deb "${CUDA_REPO}/cuda-keyring_1.1-1_all.deb" \
 && dpkg -i /tmp/cuda-keyring.deb && rm /tmp/cuda-keyring.deb \
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "cuda-nvcc-${CUDA_VERSION/./-}" "cuda-libraries-dev-${CUDA_VERSION/./-}" >/dev/null \
 && rm -rf /var/lib/apt/lists/*
ENV CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL org.scalebench.base="cuda-devel"
