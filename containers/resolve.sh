#!/usr/bin/env bash
# Checks that an image variant's Python dependencies resolve for the image's platform
# (Python 3.11, manylinux x86_64) without building it: pip's dry run, JSON report to stdout.
# Usage: containers/resolve.sh STACK VARIANT     e.g. containers/resolve.sh tensorflow gpu
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/${1:?usage: resolve.sh STACK VARIANT}/requirements-${2:?usage: resolve.sh STACK VARIANT}.txt"
[ -f "$req" ] || { echo "resolve.sh: no requirements file $req" >&2; exit 1; }
pip="${PIP:-pip}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$pip" install --dry-run --ignore-installed --quiet --report "$tmp/report.json" --only-binary=:all: \
  --python-version 3.11 --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --target "$tmp/target" -r "$req" >"$tmp/log" 2>&1 \
  || { grep -v "is ignored: it is neither" "$tmp/log" | tail -20 >&2; exit 1; }
cat "$tmp/report.json"
