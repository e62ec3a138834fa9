#!/usr/bin/env bash
# Puts torch's CPU wheel into containers/.wheels/torch/ for the image build (a docker build sees
# neither the host's pip configuration nor its wheel folders). Tries PyTorch's CPU index; pip
# takes the wheel from a local wheel folder first when the host's pip is configured with one.
# Never a CUDA build: the wheel must carry the +cpu tag.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="$here/.wheels/torch"
version="$(sed -n 's/^torch==//p' "$here/torch/requirements-cpu.txt")"
mkdir -p "$out"
if ls "$out"/torch-"$version"-*.whl >/dev/null 2>&1; then exit 0; fi
pip="$(command -v pip3 || command -v pip)"
# the log stays out of the build context: its text differs per run and would end the build cache
log="$(mktemp)"; trap 'rm -f "$log"' EXIT
"$pip" download --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
  --index-url https://download.pytorch.org/whl/cpu --timeout 30 --retries 1 -d "$out" "torch==$version" >"$log" 2>&1 \
  || { grep -v "is ignored: it is neither" "$log" | tail -5 >&2; echo "fetch-wheels: could not get torch==$version" >&2; exit 1; }
ls "$out"/torch-"$version"-*.whl
