#!/usr/bin/env bash
# Checks that an image variant's Python dependencies resolve for the image's platform
# (Python 3.11, manylinux x86_64) without building it: pip's dry run, JSON report to stdout.
# Usage: containers/resolve.sh STACK VARIANT     e.g. containers/resolve.sh tensorflow gpu
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/${1:?usage: resolve.sh STACK VARIANT}/requirements-${2:?usage: resolve.sh STACK VARIANT}.txt"
[ -f "$req" ] || { echo "resolve.sh: no requirements file $req" >&2; exit 1; }
pip="${PIP:-pip}"
# --isolated: the host's pip configuration and PIP_* variables may point at a local folder of CPU
# wheels (torch 2.13.0+cpu satisfies ==2.13.0), which would "resolve" a GPU variant to CPU builds
cert=(); [ -n "${PIP_CERT:-}" ] && cert=(--cert "$PIP_CERT")
[ -z "${PIP_CERT:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ] && cert=(--cert /etc/ssl/certs/ca-certificates.crt)
platforms=(); for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done  # glibc 2.36: Debian 12
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$pip" --isolated install "${cert[@]}" --dry-run --ignore-installed --quiet --report "$tmp/report.json" --only-binary=:all: \
  --python-version 3.11 --implementation cp --platform manylinux2014_x86_64 "${platforms[@]}" --target "$tmp/target" -r "$req" >"$tmp/log" 2>&1 \
  || { grep -v "is ignored: it is neither" "$tmp/log" | tail -20 >&2; exit 1; }
cat "$tmp/report.json"
