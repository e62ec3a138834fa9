#!/usr/bin/env bash
# mmcv 2.1.0 with its compiled ops, into /tmp/mmcv/ (run in the mmdet image's build stage only).
#   cpu: the prebuilt wheel in /tmp/wheels/ when there is one, else its sdist compiled here
#   gpu: its sdist compiled with FORCE_CUDA=1 for TORCH_CUDA_ARCH_LIST by the CUDA toolchain at
#        torch's own CUDA (CUDA_TOOLCHAIN=pypi: NVIDIA's wheels at the version torch's wheel names;
#        base: the base image's CUDA_HOME), refused in one line when nvcc's CUDA is not torch's; the
#        built extension's SASS and PTX archs are read back and printed
# Env: TORCH_CUDA_ARCH_LIST, MAX_JOBS, CUDA_TOOLCHAIN (pypi | base)
set -euo pipefail
# (the summary lines also go to /tmp/mmcv/BUILD.txt, kept in the image as /opt/openmmlab/mmcv-build.txt)
variant="${1:?usage: build-mmcv.sh cpu|gpu}"
here="$(dirname "$0")"
py=/opt/venv/bin/python
pip="/opt/venv/bin/pip"
mkdir -p /tmp/mmcv
if [ "$variant" = cpu ] && ls /tmp/wheels/mmcv-2.1.0-*.whl >/dev/null 2>&1; then
  cp /tmp/wheels/mmcv-2.1.0-*.whl /tmp/mmcv/
  exit 0
fi
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ python3-dev >/dev/null
$pip install -q "setuptools<81" wheel ninja psutil
force_cuda=0
if [ "$variant" = gpu ]; then
  force_cuda=1
  if [ "${CUDA_TOOLCHAIN:-pypi}" = pypi ]; then
    req="$($py "$here/cuda_toolchain.py" requirement)"
    echo "mmcv: CUDA toolchain $req (the version torch's wheel requires)" | tee -a /tmp/mmcv/BUILD.txt
    $pip install -q "$req"
    CUDA_HOME="$($py "$here/cuda_toolchain.py" home)"
  fi
  [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] \
    || { echo "mmcv: no nvcc at CUDA_HOME='${CUDA_HOME:-}' (CUDA_TOOLCHAIN=base needs a base image with a CUDA toolkit)" >&2; exit 1; }
  export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"
  $py "$here/cuda_toolchain.py" check "$CUDA_HOME/bin/nvcc" | sed 's/^/mmcv: /' | tee -a /tmp/mmcv/BUILD.txt
fi
$pip download -q --no-deps --no-build-isolation --no-binary :all: mmcv==2.1.0 -d /tmp/sdist
start=$(date +%s)
MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-}" MAX_JOBS="${MAX_JOBS:-2}" \
  CFLAGS="-O2 -g0" CXXFLAGS="-O2 -g0" $pip wheel -q --no-deps --no-build-isolation /tmp/sdist/mmcv-2.1.0.tar.gz -w /tmp/mmcv
echo "mmcv: compiled ($variant, TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-}) in $(( $(date +%s) - start )) s" | tee -a /tmp/mmcv/BUILD.txt
if [ "$variant" = gpu ]; then
  # cuobjdump only reads the fatbin (PyPI has it from CUDA 13.2 on; newer ones read older binaries)
  $pip install -q --target /tmp/inspect "nvidia-cuda-cuobjdump==13.2.86"
  $py "$here/cuda_toolchain.py" archs /tmp/mmcv/mmcv-2.1.0-*.whl "$TORCH_CUDA_ARCH_LIST" \
    "$(ls /tmp/inspect/nvidia/cu*/bin/cuobjdump)" | sed 's/^/mmcv: /' | tee -a /tmp/mmcv/BUILD.txt
fi
