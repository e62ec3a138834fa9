#!/usr/bin/env bash
# Checks that an image variant's Python dependencies resolve for the image's platform
# (Python 3.11, manylinux x86_64) without building it: pip's dry run, JSON report to stdout.
# Usage: containers/resolve.sh STACK VARIANT     e.g. containers/resolve.sh tensorflow gpu
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/${1:?usage: resolve.sh STACK VARIANT}/requirements-${2:?usage: resolve.sh STACK VARIANT}.txt"
[ -f "$req" ] || { echo "resolve.sh: no requirements file $req" >&2; exit 1; }
reqs=(-r "$req"); nodeps=()
# A stack built FROM another (its `base` in include/configs/stacks.yaml) adds a pinned closure
# installed with --no-deps on top of its base's set: resolve the base's set, then check each pinned
# wheel of the closure exists for the platform, as it is installed (mmcv is compiled in the image).
sb="${SCALEBENCH_CLI:-$here/../.venv/bin/scalebench}"
base="$(SCALEBENCH_PROJECT_DIR="$here/.." "$sb" stacks --base-of "$1")" || exit 1
if [ -n "$base" ]; then reqs=(-r "$here/$base/requirements-$2.txt"); nodeps=(-r "$req"); fi
pip="${PIP:-pip}"
# --isolated: the host's pip configuration and PIP_* variables may point at a local folder of CPU
# wheels (torch 2.13.0+cpu satisfies ==2.13.0), which would "resolve" a GPU variant to CPU builds
cert=(); [ -n "${PIP_CERT:-}" ] && cert=(--cert "$PIP_CERT")
[ -z "${PIP_CERT:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ] && cert=(--cert /etc/ssl/certs/ca-certificates.crt)
platforms=(); for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done  # glibc 2.36: Debian 12
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
# pure-Python dependencies published only as sdists (no platform of their own): built to wheels
# here first, since a dry run for another platform takes wheels only
links=()
if [ -f "$here/$1/sdist-only.txt" ]; then
  "$pip" --isolated wheel "${cert[@]}" --quiet --no-deps -w "$tmp/wheels" -r "$here/$1/sdist-only.txt" >"$tmp/log" 2>&1 \
    || { tail -20 "$tmp/log" >&2; exit 1; }
  links=(--find-links "$tmp/wheels")
fi
"$pip" --isolated install "${cert[@]}" --dry-run --ignore-installed --quiet --report "$tmp/report.json" --only-binary=:all: \
  --python-version 3.11 --implementation cp --platform manylinux2014_x86_64 "${platforms[@]}" --target "$tmp/target" "${links[@]}" "${reqs[@]}" >"$tmp/log" 2>&1 \
  || { grep -v "is ignored: it is neither" "$tmp/log" | tail -20 >&2; exit 1; }
if [ ${#nodeps[@]} -gt 0 ]; then
  "$pip" --isolated install "${cert[@]}" --dry-run --ignore-installed --quiet --report "$tmp/nodeps.json" --only-binary=:all: \
    --no-deps --python-version 3.11 --implementation cp --platform manylinux2014_x86_64 "${platforms[@]}" \
    --target "$tmp/target" "${links[@]}" "${nodeps[@]}" >"$tmp/log" 2>&1 || { tail -20 "$tmp/log" >&2; exit 1; }
  python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); a["install"]+=b["install"]; print(json.dumps(a))' \
    "$tmp/report.json" "$tmp/nodeps.json"
else
  cat "$tmp/report.json"
fi
