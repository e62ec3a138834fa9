# The GPU images' default base: our Debian 12 base (Python 3.11, as every image's pins are
# resolved for) plus NVIDIA's CUDA toolkit from its Debian 12 apt repository. It is a *devel*
# base because mmcv's CUDA ops are compiled with nvcc; torch and TensorFlow bring their own CUDA
# runtime, cuDNN and NCCL as PyPI wheels. The driver comes from the host (NVIDIA Container Toolkit).
# Built by `make images-gpu` (containers/build-gpu.sh); name your own with GPU_BASE_IMAGE instead
# (any Debian 12 based image with python3-venv, g++ and a CUDA 12 toolkit).
ARG BASE_IMAGE=scalebench/debian-base:bookworm
FROM ${BASE_IMAGE}
ARG CUDA_VERSION=12.8
ARG CUDA_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates curl g++ python3-dev python3-venv >/dev/null \
 && curl -fsSL -o /tmp/cuda-keyring.deb "${CUDA_REPO}/cuda-keyring_1.1-1_all.deb" \
 && dpkg -i /tmp/cuda-keyring.deb && rm /tmp/cuda-keyring.deb \
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "cuda-nvcc-${CUDA_VERSION/./-}" "cuda-libraries-dev-${CUDA_VERSION/./-}" >/dev/null \
 && rm -rf /var/lib/apt/lists/*
ENV CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL org.scalebench.base="cuda-devel"
