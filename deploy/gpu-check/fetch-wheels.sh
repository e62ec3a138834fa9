#!/usr/bin/env bash
# Here, with PyPI reachable: the kit's dependencies (numpy, pillow, jsonschema and its deps) as
# CPython 3.12 manylinux wheels, into the git-ignored deploy/gpu-check/wheels/ that travels to a
# GPU host without network (make gpu-check-wheels). Torch and nvidia-ml-py are the host's own.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cert=(); [ -f /etc/ssl/certs/ca-certificates.crt ] && cert=(--cert /etc/ssl/certs/ca-certificates.crt)
platforms=(); for minor in $(seq 17 35); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
# --isolated: the host's pip config may add local wheel folders built for this machine's Python
"${PIP:-pip}" --isolated --disable-pip-version-check download "${cert[@]}" -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 "${platforms[@]}" -d "$here/wheels" numpy pillow jsonschema
ls "$here/wheels"
