#!/usr/bin/env bash
# make gpu-check. Usage: run.sh [OUT_DIR] [--cpu]
# With a Docker engine and the built GPU image (GPU_CHECK_IMAGE, default scalebench/torch:gpu):
# gpu_check.py inside that image with every GPU of the host (--cpu: none, the CPU twin), so the
# image's torch, kit and trainer are what is checked. Without them (a lent GPU machine: Python 3.12,
# CUDA torch, nvidia-ml-py; no Docker, no network): natively, after installing the kit's missing
# dependencies from deploy/gpu-check/wheels into a venv that sees the host's torch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
image="${GPU_CHECK_IMAGE:-scalebench/torch:gpu}"
out=""; cpu=()
for arg in "$@"; do if [ "$arg" = --cpu ]; then cpu=(--cpu); else out="$arg"; fi; done
out="${out:-$root/.state/gpu-check}"
if command -v docker >/dev/null && docker image inspect "$image" >/dev/null 2>&1; then
  mkdir -p "$out"; out="$(cd "$out" && pwd)"
  gpus=(--gpus all); [ ${#cpu[@]} -eq 0 ] || gpus=()
  echo "gpu-check: in $image ($( [ ${#cpu[@]} -eq 0 ] && echo 'all GPUs' || echo 'CPU twin'))"
  exec docker run --rm "${gpus[@]}" --ipc=host -e SCALEBENCH_GPU_CHECK_IMAGE="$image" \
    -v "$root:/repo:ro" -v "$out:/out" "$image" python /repo/deploy/gpu-check/gpu_check.py "${cpu[@]}" /out
fi
[ -z "${GPU_CHECK_IMAGE:-}" ] || { echo "gpu-check: GPU_CHECK_IMAGE=$image is not on this Docker engine (make images-gpu)" >&2; exit 1; }
py="${PYTHON:-python3}"
if ! "$py" -c "import jsonschema, PIL, numpy" 2>/dev/null; then
  [ -d "$here/wheels" ] || { echo "gpu-check: the kit needs numpy, pillow and jsonschema; run 'make gpu-check-wheels' where PyPI is reachable and bring deploy/gpu-check/wheels along" >&2; exit 1; }
  venv="${GPU_CHECK_VENV:-/tmp/scalebench-gpu-check-venv}"
  "$py" -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --no-index --find-links "$here/wheels" numpy pillow jsonschema
  py="$venv/bin/python"
fi
echo "gpu-check: natively with $("$py" -c 'import sys; print(sys.executable)')"
exec "$py" "$here/gpu_check.py" "${cpu[@]}" "$out"
