#!/usr/bin/env bash
# make gpu-check: run on a lent GPU host (Python 3.12, CUDA torch, nvidia-ml-py; no Docker, no
# network). Installs the kit's missing dependencies from deploy/gpu-check/wheels into a venv
# that sees the host's torch, then runs gpu_check.py. Usage: run.sh [OUT_DIR] [--cpu]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3}"
if ! "$py" -c "import jsonschema, PIL, numpy" 2>/dev/null; then
  [ -d "$here/wheels" ] || { echo "gpu-check: the kit needs numpy, pillow and jsonschema; run 'make gpu-check-wheels' where PyPI is reachable and bring deploy/gpu-check/wheels along" >&2; exit 1; }
  venv="${GPU_CHECK_VENV:-/tmp/scalebench-gpu-check-venv}"
  "$py" -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --no-index --find-links "$here/wheels" numpy pillow jsonschema
  py="$venv/bin/python"
fi
exec "$py" "$here/gpu_check.py" "$@"
