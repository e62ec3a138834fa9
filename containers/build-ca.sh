#!/usr/bin/env bash
# Puts the extra CA bundle for image builds at containers/.build-ca/ca.crt (empty when there is
# none): builds behind an HTTPS-re-signing proxy trust it in their build stage only.
# Env: SCALEBENCH_EXTRA_CA (default: the host's /etc/ssl/certs/ca-certificates.crt)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$here/.build-ca"
ca="${SCALEBENCH_EXTRA_CA:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$ca" ]; then cmp -s "$ca" "$here/.build-ca/ca.crt" || cp "$ca" "$here/.build-ca/ca.crt"; else : >"$here/.build-ca/ca.crt"; fi
